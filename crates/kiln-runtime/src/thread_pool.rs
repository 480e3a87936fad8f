//! The thread pool behind `TVMBackendParallelLaunch` / `TVMBackendParallelBarrier`, with TVM's
//! semantics, and [`parallel_for`] / [`parallel_launch`] for Kiln's own Rust code.
//!
//! - A launch runs tasks `0..num_task`; `num_task = 0` means "one task per pool thread". The
//!   calling thread runs task 0, persistent workers run the others, and the launch returns when
//!   all are done. Every task of a launch runs on its own thread, so tasks may wait for each
//!   other with the barrier (a launch asking for more tasks than the pool has threads grows the
//!   pool).
//! - A task that returns non-zero makes the launch return -1 with that task's error (kind kept,
//!   message prefixed with the task id); other tasks waiting at a barrier are released with an
//!   error instead of waiting forever.
//! - A launch from inside a task (nested parallelism) runs inline: its tasks run one after the
//!   other on the calling thread (`num_task = 0` then means one task). A barrier in such a
//!   serial launch of several tasks is an error, since the tasks cannot meet.
//! - Launches from different threads take turns on the one pool.
//! - The thread count comes from `KILN_NUM_THREADS`, then `TVM_NUM_THREADS`, then
//!   `OMP_NUM_THREADS` (the first positive integer found), else the number of cores;
//!   [`set_num_threads`] (global `runtime.SetNumThreads`) changes it at run time.

use kiln_ffi::error::{ffi_guard, take_raised};
use kiln_ffi::sync::RecoverPoison;
use kiln_ffi::{register_global, Error, Result};
use std::cell::{Cell, UnsafeCell};
use std::ffi::{c_int, c_void};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

/// `TVMParallelGroupEnv`: what each task of a launch receives.
#[repr(C)]
#[derive(Debug)]
pub struct ParallelGroupEnv {
    /// Kiln's barrier for the launch (read by `TVMBackendParallelBarrier`).
    pub sync_handle: *mut c_void,
    /// Number of tasks in the launch.
    pub num_task: i32,
}

/// `FTVMParallelLambda`: the body of a parallel launch, called once per task id.
pub type ParallelLambda =
    unsafe extern "C" fn(task_id: c_int, penv: *mut ParallelGroupEnv, cdata: *mut c_void) -> c_int;

/// Most tasks (and threads) one launch may use.
pub const MAX_THREADS: usize = 1024;

/// Busy-wait rounds of a worker between launches before it sleeps.
const WORKER_SPINS: u32 = 2_000;
/// Busy-wait rounds of the launching thread before it sleeps until the tasks are done.
const CALLER_SPINS: u32 = 2_000;
const BARRIER_MAGIC: u64 = 0x6b69_6c6e_6261_7272; // "kilnbarr"
const ABANDONED: &str = "barrier abandoned because another task of the launch failed";

/// Spins briefly, then yields the CPU, then sleeps a little: waits stay cheap when short and do
/// not starve the tasks being waited for when the machine has fewer cores than threads.
fn backoff(round: &mut u32) {
    *round = round.saturating_add(1);
    if *round < 64 {
        std::hint::spin_loop();
    } else if *round < 20_000 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
}

// ---------------------------------------------------------------------------------------------
// Thread count.

static CONFIGURED_THREADS: AtomicUsize = AtomicUsize::new(0);

/// The thread count that the environment asks for: the first of `KILN_NUM_THREADS`,
/// `TVM_NUM_THREADS`, `OMP_NUM_THREADS` that holds a positive integer (for `OMP_NUM_THREADS`,
/// its first entry, as in `"4,2"`), capped at [`MAX_THREADS`]. `get` reads a variable.
pub fn threads_from_env(get: impl Fn(&str) -> Option<String>) -> Option<usize> {
    ["KILN_NUM_THREADS", "TVM_NUM_THREADS", "OMP_NUM_THREADS"]
        .iter()
        .filter_map(|name| get(name))
        .find_map(|v| {
            v.split(',')
                .next()?
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
        })
        .map(|n| n.min(MAX_THREADS))
}

/// The default thread count: from the environment (see [`threads_from_env`]), else the number of
/// cores. Read once.
pub fn default_num_threads() -> usize {
    static DEFAULT: OnceLock<usize> = OnceLock::new();
    *DEFAULT.get_or_init(|| {
        threads_from_env(|k| std::env::var(k).ok()).unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
                .min(MAX_THREADS)
        })
    })
}

/// The number of threads a launch with `num_task = 0` uses (the caller included).
pub fn num_threads() -> usize {
    match CONFIGURED_THREADS.load(Ordering::Relaxed) {
        0 => default_num_threads(),
        n => n,
    }
}

/// Sets the thread count for later launches; 0 goes back to the default.
pub fn set_num_threads(n: usize) -> Result<()> {
    if n > MAX_THREADS {
        return Err(Error::value_error(format!(
            "cannot use {n} threads: at most {MAX_THREADS}"
        )));
    }
    CONFIGURED_THREADS.store(n, Ordering::Relaxed);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// One launch.

/// A reusable barrier for the tasks of one launch (what `sync_handle` points to).
struct Barrier {
    magic: u64,
    num_task: usize,
    /// The tasks run one after another on one thread: they cannot meet.
    serial: bool,
    arrived: AtomicUsize,
    generation: AtomicUsize,
    broken: AtomicBool,
}

impl Barrier {
    fn new(num_task: usize, serial: bool) -> Barrier {
        Barrier {
            magic: BARRIER_MAGIC,
            num_task,
            serial,
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            broken: AtomicBool::new(false),
        }
    }

    fn wait(&self) -> Result<()> {
        if self.num_task <= 1 {
            return Ok(());
        }
        if self.serial {
            return Err(Error::runtime_error(format!(
                "TVMBackendParallelBarrier: this launch of {} tasks runs serially on one thread \
                 (it was started from inside another parallel task), so its tasks cannot wait \
                 for each other",
                self.num_task
            )));
        }
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.num_task {
            // Last to arrive: reset for the next use, then release the others.
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return Ok(());
        }
        let mut round = 0;
        while self.generation.load(Ordering::Acquire) == generation {
            if self.broken.load(Ordering::Acquire) {
                return Err(Error::runtime_error(ABANDONED));
            }
            backoff(&mut round);
        }
        Ok(())
    }
}

/// Everything the tasks of one launch share. Lives on the launching thread's stack until every
/// task is done.
struct Job {
    lambda: ParallelLambda,
    cdata: *mut c_void,
    env: UnsafeCell<ParallelGroupEnv>,
    barrier: Barrier,
    /// Tasks not finished yet, task 0 excluded.
    pending: AtomicUsize,
    errors: Mutex<Vec<(usize, Error)>>,
}

// SAFETY: tasks only read `lambda`, `cdata` and `env`; the rest is atomics and a mutex. Passing
// `cdata` between threads is what the launch's caller asked for.
unsafe impl Sync for Job {}

impl Job {
    fn new(lambda: ParallelLambda, cdata: *mut c_void, num_task: usize, serial: bool) -> Job {
        Job {
            lambda,
            cdata,
            env: UnsafeCell::new(ParallelGroupEnv {
                sync_handle: std::ptr::null_mut(),
                num_task: num_task as i32,
            }),
            barrier: Barrier::new(num_task, serial),
            pending: AtomicUsize::new(num_task - 1),
            errors: Mutex::new(Vec::new()),
        }
    }

    /// Points the env at the barrier; call once the job is at its final address.
    fn bind(&self) {
        // SAFETY: no task runs yet, so nothing else reads env.
        unsafe { (*self.env.get()).sync_handle = &self.barrier as *const Barrier as *mut c_void };
    }

    /// Runs one task on the current thread, keeping its error.
    fn run(&self, task: usize) {
        // SAFETY: the launch's caller promised a valid lambda and cdata for every task id.
        let rc = unsafe { (self.lambda)(task as c_int, self.env.get(), self.cdata) };
        if rc != 0 {
            let err = take_raised(&format!("parallel task {task}"));
            self.barrier.broken.store(true, Ordering::Release);
            lock(&self.errors).push((task, err));
        }
    }

    fn result(self) -> Result<()> {
        let n = self.barrier.num_task;
        let mut errors = self.errors.into_inner().recover();
        if errors.is_empty() {
            return Ok(());
        }
        // Report the task that failed first-hand (lowest id first), not one released from the
        // barrier.
        let first = (0..errors.len())
            .min_by_key(|&i| (errors[i].1.message() == ABANDONED, errors[i].0))
            .unwrap_or(0);
        let others = errors.len() - 1;
        let (task, err) = errors.swap_remove(first);
        let more = match others {
            0 => String::new(),
            1 => " (1 other task failed too)".to_string(),
            k => format!(" ({k} other tasks failed too)"),
        };
        Err(err.context(format!("parallel task {task} of {n}{more}")))
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().recover()
}

thread_local! {
    /// True while this thread runs a task (workers always): launches from here run inline.
    static IN_TASK: Cell<bool> = const { Cell::new(false) };
}

/// Runs all tasks of a launch one after the other on this thread.
fn run_serial(lambda: ParallelLambda, cdata: *mut c_void, num_task: usize) -> Result<()> {
    let job = Job::new(lambda, cdata, num_task, true);
    job.bind();
    let was = IN_TASK.with(|f| f.replace(true));
    for task in 0..num_task {
        job.run(task);
    }
    IN_TASK.with(|f| f.set(was));
    job.result()
}

// ---------------------------------------------------------------------------------------------
// The pool.

struct Slot {
    generation: u64,
    /// The current job (a `*const Job`), valid while any of its tasks is unfinished.
    job: usize,
    num_task: usize,
    sleepers: usize,
}

struct Shared {
    slot: Mutex<Slot>,
    wake: Condvar,
    /// Mirror of `slot.generation` that workers spin on without the lock.
    generation: AtomicU64,
    /// Whether the launching thread sleeps on `done` (so finishers skip the wake-up call).
    done_lock: Mutex<bool>,
    done: Condvar,
}

struct Pool {
    shared: Arc<Shared>,
    /// Held for a whole launch; the value is the number of workers started.
    launch: Mutex<usize>,
    /// The process that started the workers (a forked child has none and makes a new pool).
    pid: u32,
}

fn pool() -> Arc<Pool> {
    static POOL: Mutex<Option<Arc<Pool>>> = Mutex::new(None);
    let mut guard = lock(&POOL);
    match &*guard {
        Some(p) if p.pid == std::process::id() => p.clone(),
        _ => {
            let p = Arc::new(Pool {
                shared: Arc::new(Shared {
                    slot: Mutex::new(Slot {
                        generation: 0,
                        job: 0,
                        num_task: 0,
                        sleepers: 0,
                    }),
                    wake: Condvar::new(),
                    generation: AtomicU64::new(0),
                    done_lock: Mutex::new(false),
                    done: Condvar::new(),
                }),
                launch: Mutex::new(0),
                pid: std::process::id(),
            });
            *guard = Some(p.clone());
            p
        }
    }
}

/// A worker serves task id `index` of every launch that has more than `index` tasks.
fn worker_main(shared: Arc<Shared>, index: usize, mut seen: u64) {
    IN_TASK.with(|f| f.set(true));
    loop {
        let mut round = 0;
        while shared.generation.load(Ordering::Acquire) == seen && round < WORKER_SPINS {
            backoff(&mut round);
        }
        let (job, num_task) = {
            let mut slot = lock(&shared.slot);
            while slot.generation == seen {
                slot.sleepers += 1;
                slot = shared.wake.wait(slot).recover();
                slot.sleepers -= 1;
            }
            seen = slot.generation;
            (slot.job, slot.num_task)
        };
        if index < num_task {
            // SAFETY: the launcher waits for this task before the job goes away.
            let job = unsafe { &*(job as *const Job) };
            job.run(index);
            if job.pending.fetch_sub(1, Ordering::AcqRel) == 1 {
                // The job may be gone from here on; only `shared` is touched.
                if *lock(&shared.done_lock) {
                    shared.done.notify_all();
                }
            }
        }
    }
}

/// Starts a detached pool thread named `kiln-worker-{index}` that runs `body`.
///
/// With `pthread_create` rather than `std::thread::Builder`: std's spawning (thread records,
/// spawn hooks, the stack-overflow handler's per-thread table) costs about 12 KB of the deployable
/// library. What differs: the name is only the OS thread name (what `top -H` and debuggers show,
/// cut to 15 bytes), not one Rust's panic messages show; a stack overflow is a plain SIGSEGV
/// rather than std's message and abort; the stack has the system's default size.
fn spawn_worker(index: usize, body: Box<dyn FnOnce() + Send>) -> std::io::Result<()> {
    type Body = Box<dyn FnOnce() + Send>;
    extern "C" fn start(arg: *mut c_void) -> *mut c_void {
        // SAFETY: `arg` is the `Box<Body>` leaked below, handed to exactly this thread.
        let body = unsafe { Box::from_raw(arg as *mut Body) };
        // A panic must not unwind out of this C entry point; the hook has reported it.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
        std::ptr::null_mut()
    }
    let arg = Box::into_raw(Box::new(body)) as *mut c_void;
    let mut thread: libc::pthread_t = 0;
    // SAFETY: `start` takes over `arg` when the thread starts; on failure it stays ours.
    let rc = unsafe { libc::pthread_create(&mut thread, std::ptr::null(), start, arg) };
    if rc != 0 {
        // SAFETY: the thread was not created, so `arg` was not handed over.
        drop(unsafe { Box::from_raw(arg as *mut Body) });
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    let mut name = format!("kiln-worker-{index}").into_bytes();
    name.truncate(15); // the kernel's limit, without the NUL
    name.push(0);
    // SAFETY: `thread` was just created (a name that does not fit is refused, not an error here);
    // detaching it means nobody joins it, as with std's dropped JoinHandle.
    unsafe {
        libc::pthread_setname_np(thread, name.as_ptr() as *const libc::c_char);
        libc::pthread_detach(thread);
    }
    Ok(())
}

fn launch_on_pool(lambda: ParallelLambda, cdata: *mut c_void, num_task: usize) -> Result<()> {
    let pool = pool();
    let shared = &pool.shared;
    let mut workers = lock(&pool.launch);
    while *workers < num_task - 1 {
        let (s, index) = (shared.clone(), *workers + 1);
        let seen = shared.generation.load(Ordering::Acquire);
        spawn_worker(index, Box::new(move || worker_main(s, index, seen))).map_err(|e| {
            Error::runtime_error(format!("cannot start thread pool worker {index}: {e}"))
        })?;
        *workers += 1;
    }
    let job = Job::new(lambda, cdata, num_task, false);
    job.bind();
    {
        let mut slot = lock(&shared.slot);
        slot.generation += 1;
        slot.job = &job as *const Job as usize;
        slot.num_task = num_task;
        shared.generation.store(slot.generation, Ordering::Release);
        if slot.sleepers > 0 {
            shared.wake.notify_all();
        }
    }
    IN_TASK.with(|f| f.set(true));
    job.run(0);
    IN_TASK.with(|f| f.set(false));
    let mut round = 0;
    while job.pending.load(Ordering::Acquire) != 0 && round < CALLER_SPINS {
        backoff(&mut round);
    }
    if job.pending.load(Ordering::Acquire) != 0 {
        let mut waiting = lock(&shared.done_lock);
        while job.pending.load(Ordering::Acquire) != 0 {
            *waiting = true;
            waiting = shared.done.wait(waiting).recover();
        }
        *waiting = false;
    }
    drop(workers);
    job.result()
}

/// Runs `lambda(task_id, env, cdata)` for task ids `0..num_task` (0: one per pool thread) and
/// waits for all of them; see the module documentation for the rules.
///
/// # Safety
/// `lambda` must be safe to call with `cdata` from several threads at once.
pub unsafe fn launch_raw(lambda: ParallelLambda, cdata: *mut c_void, num_task: i32) -> Result<()> {
    let requested = usize::try_from(num_task)
        .ok()
        .filter(|&n| n <= MAX_THREADS)
        .ok_or_else(|| {
            Error::value_error(format!(
                "TVMBackendParallelLaunch: num_task {num_task} is out of range [0, {MAX_THREADS}]"
            ))
        })?;
    if IN_TASK.with(|f| f.get()) {
        return run_serial(lambda, cdata, requested.max(1));
    }
    let n = if requested == 0 {
        num_threads()
    } else {
        requested
    };
    if n == 1 {
        return run_serial(lambda, cdata, 1);
    }
    launch_on_pool(lambda, cdata, n)
}

// ---------------------------------------------------------------------------------------------
// Rust API.

/// What a task of [`parallel_launch`] knows: its id, the number of tasks, and the barrier.
pub struct TaskContext<'a> {
    task_id: usize,
    num_task: usize,
    env: *mut ParallelGroupEnv,
    _env: PhantomData<&'a ParallelGroupEnv>,
}

impl TaskContext<'_> {
    /// This task's id, in `0..num_task()`.
    pub fn task_id(&self) -> usize {
        self.task_id
    }

    /// Number of tasks in the launch.
    pub fn num_task(&self) -> usize {
        self.num_task
    }

    /// Waits until every task of the launch has reached this barrier.
    pub fn barrier(&self) -> Result<()> {
        // SAFETY: env comes from the running launch.
        unsafe { barrier(self.env) }
    }
}

unsafe extern "C" fn trampoline<F>(
    task_id: c_int,
    penv: *mut ParallelGroupEnv,
    cdata: *mut c_void,
) -> c_int
where
    F: Fn(&TaskContext<'_>) -> Result<()> + Sync,
{
    // SAFETY: parallel_launch passes its `&F` as cdata and keeps it alive until every task is
    // done; `penv` is the launch's live env.
    let (f, num_task) = unsafe { (&*(cdata as *const F), (*penv).num_task as usize) };
    let ctx = TaskContext {
        task_id: task_id as usize,
        num_task,
        env: penv,
        _env: PhantomData,
    };
    ffi_guard(|| f(&ctx))
}

/// Runs `f` once per task (`num_task` tasks; 0: one per pool thread) on the pool and waits.
/// Errors (and panics) from tasks come back as the launch's error.
pub fn parallel_launch<F>(num_task: usize, f: F) -> Result<()>
where
    F: Fn(&TaskContext<'_>) -> Result<()> + Sync,
{
    let n = i32::try_from(num_task).map_err(|_| {
        Error::value_error(format!("parallel_launch: num_task {num_task} is too large"))
    })?;
    // SAFETY: the trampoline matches F, and F is Sync, so calling it from many threads is fine;
    // `f` outlives the launch.
    unsafe { launch_raw(trampoline::<F>, &f as *const F as *mut c_void, n) }
}

/// Calls `f(i)` for every `i` in `0..n`, split into contiguous ranges over the pool's threads.
/// A panic in `f` becomes the returned error.
pub fn parallel_for<F>(n: usize, f: F) -> Result<()>
where
    F: Fn(usize) + Sync,
{
    if n == 0 {
        return Ok(());
    }
    let tasks = num_threads().min(n);
    parallel_launch(tasks, |ctx| {
        let k = ctx.num_task() as u128;
        let t = ctx.task_id() as u128;
        let (lo, hi) = (
            (n as u128 * t / k) as usize,
            (n as u128 * (t + 1) / k) as usize,
        );
        (lo..hi).for_each(&f);
        Ok(())
    })
}

/// Waits at the barrier of the launch that `penv` belongs to.
///
/// # Safety
/// `penv` must be NULL or the env a running launch passed to this task.
pub unsafe fn barrier(penv: *mut ParallelGroupEnv) -> Result<()> {
    // SAFETY: the caller guarantees NULL or a running launch's env.
    let env = unsafe { penv.as_ref() }.ok_or_else(|| {
        Error::value_error("TVMBackendParallelBarrier: the parallel group env is NULL")
    })?;
    // SAFETY: a Kiln launch's env holds NULL or its live Barrier (the magic is checked below).
    let b = unsafe { (env.sync_handle as *const Barrier).as_ref() };
    match b {
        Some(b) if b.magic == BARRIER_MAGIC => b.wait(),
        _ => Err(Error::value_error(
            "TVMBackendParallelBarrier: the env does not come from a Kiln parallel launch",
        )),
    }
}

/// Exported for generated code: runs a parallel launch (see the module documentation); 0 on
/// success, -1 with the first failing task's error raised.
///
/// # Safety
/// `flambda` must be safe to call with `cdata` from several threads at once.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendParallelLaunch(
    flambda: Option<ParallelLambda>,
    cdata: *mut c_void,
    num_task: c_int,
) -> c_int {
    ffi_guard(|| {
        let f = flambda.ok_or_else(|| {
            Error::value_error("TVMBackendParallelLaunch: the task function is NULL")
        })?;
        // SAFETY: the caller's contract is launch_raw's.
        unsafe { launch_raw(f, cdata, num_task) }
    })
}

/// Exported for generated code: waits until all tasks of the launch reach the barrier; 0, or -1
/// with an error raised (bad env, serial launch, another task failed).
///
/// # Safety
/// `penv` must be NULL or the env the launch passed to this task.
#[no_mangle]
pub unsafe extern "C" fn TVMBackendParallelBarrier(
    _task_id: c_int,
    penv: *mut ParallelGroupEnv,
) -> c_int {
    // SAFETY: the caller's contract is barrier's.
    ffi_guard(|| unsafe { barrier(penv) })
}

register_global!("runtime.SetNumThreads", |n: i64| -> Result<()> {
    let n = usize::try_from(n)
        .map_err(|_| Error::value_error(format!("cannot use {n} threads: negative count")))?;
    set_num_threads(n)
});
register_global!("runtime.GetNumThreads", || num_threads() as i64);
// TVM's name for the same query.
register_global!("runtime.NumThreads", || num_threads() as i64);

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn env_order_and_parsing() {
        let env = |pairs: &[(&str, &str)]| {
            let m: HashMap<String, String> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            threads_from_env(move |k| m.get(k).cloned())
        };
        assert_eq!(env(&[]), None);
        assert_eq!(env(&[("OMP_NUM_THREADS", "3")]), Some(3));
        assert_eq!(env(&[("OMP_NUM_THREADS", "4,2")]), Some(4));
        assert_eq!(
            env(&[("TVM_NUM_THREADS", "5"), ("OMP_NUM_THREADS", "3")]),
            Some(5)
        );
        assert_eq!(
            env(&[("KILN_NUM_THREADS", "2"), ("TVM_NUM_THREADS", "5")]),
            Some(2)
        );
        // Unusable values fall through to the next variable.
        assert_eq!(
            env(&[
                ("KILN_NUM_THREADS", "zero"),
                ("TVM_NUM_THREADS", "0"),
                ("OMP_NUM_THREADS", "6")
            ]),
            Some(6)
        );
        assert_eq!(env(&[("KILN_NUM_THREADS", "100000")]), Some(MAX_THREADS));
    }

    #[test]
    fn serial_barrier_with_one_task_is_free() {
        let b = Barrier::new(1, true);
        assert!(b.wait().is_ok());
        let b = Barrier::new(3, true);
        assert_eq!(b.wait().unwrap_err().kind(), "RuntimeError");
    }
}
