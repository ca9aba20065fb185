//! The viewer layouts (Rerun blueprints) sent with o2o recordings, so a recording opens on the
//! moving body and the curves that matter instead of one panel per metric key.
//!
//! They are *default* blueprints: a layout the user rearranged in the viewer is kept.

use rerun::blueprint::components::{PanelState, PlayState};
use rerun::blueprint::{Blueprint, BlueprintPanel, Horizontal, SelectionPanel, Spatial3DView, TimePanel, TimeSeriesView, Vertical};

/// The 3D view of the bodies. The floor (the world body's geoms) is left out of the default
/// view: MuJoCo floors are tens of metres wide and would shrink the body to a speck; the
/// viewer's own grid marks the ground plane z = 0.
fn bodies_view(name: &str) -> Spatial3DView {
    Spatial3DView::new(name).with_origin("/episode/world").with_contents(["+ $origin/**", "- /episode/world/world/**"])
}

/// A training run: the evaluation body on the left; evaluation returns, normalized scores and
/// the training losses on the right; the `grad_step` timeline selected (choose `eval_step` and
/// press play to watch the evaluation episodes); the side panels collapsed to leave the room to
/// the views (their toggles are at the top right).
pub fn run_blueprint() -> Blueprint {
    Blueprint::new(Horizontal::new([
        bodies_view("evaluation episode").into(),
        Vertical::new([
            TimeSeriesView::new("eval/return").with_contents(["/eval/return"]).into(),
            TimeSeriesView::new("eval/normalized_score").with_contents(["/eval/normalized_score"]).into(),
            TimeSeriesView::new("train").with_origin("/train").into(),
            TimeSeriesView::new("episode: action and reward").with_contents(["/episode/action", "/episode/reward"]).into(),
        ])
        .into(),
    ]))
    .with_time_panel(TimePanel::new().with_timeline("grad_step").with_play_state(PlayState::Paused))
    .with_blueprint_panel(BlueprintPanel::from_state(PanelState::Collapsed))
    .with_selection_panel(SelectionPanel::from_state(PanelState::Collapsed))
}

/// `o2o dataset view`: the replayed body, and observations, actions and rewards on `dataset_step`.
pub fn dataset_blueprint() -> Blueprint {
    Blueprint::new(Horizontal::new([
        bodies_view("dataset episode").into(),
        Vertical::new([
            TimeSeriesView::new("observation").with_contents(["/episode/observation"]).into(),
            TimeSeriesView::new("action").with_contents(["/episode/action"]).into(),
            TimeSeriesView::new("reward").with_contents(["/episode/reward"]).into(),
        ])
        .into(),
    ]))
    .with_time_panel(TimePanel::new().with_timeline("dataset_step").with_play_state(PlayState::Paused))
}
