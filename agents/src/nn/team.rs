//! libtorch's own OpenMP team, reached through libgomp's C ABI (`GOMP_parallel`, what a
//! compiled `#pragma omp parallel` calls), for our fused CPU loops (the ensemble's row passes,
//! Adam). They run there rather than on threads of our own: after each matmul the team's idle
//! threads spin for a while, so threads of ours would share their cores with spinning ones
//! (measured: a 2-thread split on `std::thread` ran slower than one thread). Where libgomp is
//! not loaded (another libtorch build, another OS) the work runs on the calling thread.

use std::ffi::{c_int, c_uint, c_void, CStr};
use std::sync::{Mutex, OnceLock};

type Parallel = unsafe extern "C" fn(extern "C" fn(*mut c_void), *mut c_void, c_uint, c_uint);
type Query = unsafe extern "C" fn() -> c_int;

struct Gomp {
    parallel: Parallel,
    thread_num: Query,
    num_threads: Query,
}

fn gomp() -> Option<&'static Gomp> {
    static GOMP: OnceLock<Option<Gomp>> = OnceLock::new();
    GOMP.get_or_init(|| {
        // SAFETY: dlsym on the global namespace; a found symbol is libgomp's function of
        // that name, whose C signature is the one transmuted to.
        unsafe {
            let find = |name: &CStr| {
                let p = libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr());
                (!p.is_null()).then_some(p)
            };
            let (p, t, n) = (find(c"GOMP_parallel")?, find(c"omp_get_thread_num")?, find(c"omp_get_num_threads")?);
            Some(Gomp {
                parallel: std::mem::transmute::<*mut c_void, Parallel>(p),
                thread_num: std::mem::transmute::<*mut c_void, Query>(t),
                num_threads: std::mem::transmute::<*mut c_void, Query>(n),
            })
        }
    })
    .as_ref()
}

pub(crate) fn available() -> bool {
    gomp().is_some()
}

/// libtorch's intra-op thread count, so `--threads` governs our loops as it does its own.
pub(crate) fn threads() -> usize {
    tch::get_num_threads().max(1) as usize
}

/// How many pieces to cut a loop over `work` independent units into for [`run`]: [`threads`]
/// from `min_work` units on where the team is reachable, else 1.
pub(crate) fn pieces(work: usize, min_work: usize) -> usize {
    if work >= min_work && available() {
        threads()
    } else {
        1
    }
}

struct Job<'a, T, F> {
    pieces: Vec<Mutex<Option<T>>>,
    work: &'a F,
    gomp: &'static Gomp,
}

extern "C" fn trampoline<T: Send, F: Fn(T) + Sync>(data: *mut c_void) {
    // SAFETY: `data` is the `Job` that `run` keeps alive until GOMP_parallel returns.
    let job = unsafe { &*(data as *const Job<'_, T, F>) };
    // SAFETY: libgomp's queries, called inside its parallel region.
    let (me, team) = unsafe { ((job.gomp.thread_num)() as usize, ((job.gomp.num_threads)() as usize).max(1)) };
    for slot in job.pieces.iter().skip(me).step_by(team) {
        let piece = slot.lock().map(|mut s| s.take()).unwrap_or(None);
        if let Some(piece) = piece {
            (job.work)(piece);
        }
    }
}

/// `work(piece)` for every piece, piece `i` on team thread `i` (the caller is thread 0).
pub(crate) fn run<T: Send, F: Fn(T) + Sync>(pieces: Vec<T>, work: F) {
    match gomp() {
        Some(g) if pieces.len() > 1 => {
            let n = pieces.len() as c_uint;
            let job = Job { pieces: pieces.into_iter().map(|p| Mutex::new(Some(p))).collect(), work: &work, gomp: g };
            // SAFETY: the trampoline matches GOMP_parallel's callback type, `job` outlives the
            // call (GOMP_parallel returns after every thread has finished), and each piece is
            // taken by exactly one thread.
            unsafe { (g.parallel)(trampoline::<T, F>, &job as *const Job<'_, T, F> as *mut c_void, n, 0) };
        }
        _ => pieces.into_iter().for_each(work),
    }
}
