//! One flat TOML table for a variant's config: its base algorithm's keys and its own side by
//! side (`[agent]` of a CQL preset holds `actor_lr` and `cql_alpha` at the same level).
//!
//! A variant's config is a struct of two parts (e.g. `CqlConfig { sac, cql }`) that serde reads
//! and writes through `toml::Table` (`#[serde(try_from, into)]`): the keys its own part knows
//! go there, every other key to the base part, and each part starts from the variant's
//! defaults with the given keys merged in (nested tables key by key). Unknown keys still fail,
//! in the base part's `deny_unknown_fields`, naming the key. This keeps one definition of
//! SAC's fields for SAC, RLPD, CQL and Cal-QL instead of a copy per algorithm.

use serde::{de::DeserializeOwned, Serialize};
use toml::Table;

/// `v` as a TOML table (a config struct always serializes to one).
pub(crate) fn table_of<T: Serialize>(v: &T) -> Table {
    Table::try_from(v).expect("config structs serialize to TOML tables")
}

/// Merge `over` into `base`: nested tables key by key, anything else replaced.
pub(crate) fn merge(base: &mut Table, over: Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

/// `defaults` with the keys of `over` merged in, read back as `T` (unknown keys and bad types
/// are errors naming the key).
pub(crate) fn overlay<T: Serialize + DeserializeOwned>(defaults: &T, over: Table) -> Result<T, String> {
    let mut t = table_of(defaults);
    merge(&mut t, over);
    T::deserialize(toml::Value::Table(t)).map_err(|e| e.to_string())
}

/// Split `table` into the keys `own` has and the rest.
pub(crate) fn split(table: Table, own: &Table) -> (Table, Table) {
    table.into_iter().partition(|(k, _)| own.contains_key(k))
}

/// The two parts' tables as one.
pub(crate) fn join(mut base: Table, own: Table) -> Table {
    base.extend(own);
    base
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::MlpConfig;

    #[test]
    fn overlay_merges_nested_tables_and_rejects_unknown_keys() {
        let defaults = MlpConfig { hidden: vec![8], layer_norm: true, ..MlpConfig::default() };
        let over: Table = toml::from_str("dropout = 0.1").unwrap();
        let c: MlpConfig = overlay(&defaults, over).unwrap();
        assert_eq!(c, MlpConfig { hidden: vec![8], layer_norm: true, dropout: 0.1, ..MlpConfig::default() });
        let mut base: Table = toml::from_str("a = 1\n[t]\nx = 1\ny = 2").unwrap();
        merge(&mut base, toml::from_str("[t]\ny = 3").unwrap());
        assert_eq!(base["t"]["x"].as_integer(), Some(1));
        assert_eq!(base["t"]["y"].as_integer(), Some(3));
        let e = overlay(&defaults, toml::from_str("widths = [1]").unwrap()).unwrap_err();
        assert!(e.contains("widths"), "{e}");
        let (own, rest) = split(toml::from_str("a = 1\nb = 2").unwrap(), &toml::from_str("b = 0").unwrap());
        assert_eq!((own.len(), rest.len()), (1, 1));
        assert_eq!(join(rest, own).len(), 2);
    }
}
