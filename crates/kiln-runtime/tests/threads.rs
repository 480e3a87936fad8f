//! The thread pool through `TVMBackendParallelLaunch` / `TVMBackendParallelBarrier` and the Rust
//! API: same results for any thread count, barriers, errors, nesting, many launches.
//!
//! Tests that change the thread count hold `CONFIG` so they do not see each other's setting.

use kiln_runtime::thread_pool::{
    num_threads, parallel_for, parallel_launch, set_num_threads, ParallelGroupEnv,
    TVMBackendParallelBarrier, TVMBackendParallelLaunch,
};
use kiln_testing::error::expect_err;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Mutex;

static CONFIG: Mutex<()> = Mutex::new(());

fn with_threads<R>(n: usize, f: impl FnOnce() -> R) -> R {
    let _g = CONFIG.lock().unwrap_or_else(|e| e.into_inner());
    set_num_threads(n).unwrap();
    let r = f();
    set_num_threads(0).unwrap();
    r
}

/// What generated code does: split `data` over `penv.num_task` tasks, sum squares per task.
struct SumJob {
    data: Vec<i64>,
    partial: Vec<AtomicI64>,
    tasks_seen: AtomicUsize,
}

unsafe extern "C" fn sum_squares(
    task: c_int,
    penv: *mut ParallelGroupEnv,
    cdata: *mut c_void,
) -> c_int {
    // SAFETY: the launch below passes a SumJob that outlives it, and a live group env.
    let (job, n) = unsafe { (&*(cdata as *const SumJob), (*penv).num_task as usize) };
    job.tasks_seen.store(n, Ordering::Relaxed);
    let len = job.data.len();
    let (lo, hi) = (len * task as usize / n, len * (task as usize + 1) / n);
    let s: i64 = job.data[lo..hi].iter().map(|x| x * x % 1_000_003).sum();
    job.partial[task as usize].store(s, Ordering::Relaxed);
    0
}

fn run_sum(num_task: i32) -> (i64, usize) {
    let job = SumJob {
        data: (0..100_003).map(|i| (i * 7919) % 10007).collect(),
        partial: (0..64).map(|_| AtomicI64::new(0)).collect(),
        tasks_seen: AtomicUsize::new(0),
    };
    // SAFETY: sum_squares only reads the job and writes its own slot.
    let rc = unsafe {
        TVMBackendParallelLaunch(
            Some(sum_squares),
            &job as *const SumJob as *mut c_void,
            num_task,
        )
    };
    assert_eq!(rc, 0);
    let n = job.tasks_seen.load(Ordering::Relaxed);
    (
        job.partial.iter().map(|p| p.load(Ordering::Relaxed)).sum(),
        n,
    )
}

#[test]
fn results_are_identical_for_1_2_and_8_threads() {
    let expected: i64 = (0..100_003i64)
        .map(|i| (i * 7919) % 10007)
        .map(|x| x * x % 1_000_003)
        .sum();
    for threads in [1, 2, 8] {
        with_threads(threads, || {
            assert_eq!(num_threads(), threads);
            let (sum, tasks) = run_sum(0);
            assert_eq!(sum, expected, "{threads} threads");
            assert_eq!(tasks, threads, "num_task = 0 means the pool's thread count");
            assert_eq!(run_sum(3).0, expected);
            let out: Vec<AtomicI64> = (0..10_000).map(|_| AtomicI64::new(-1)).collect();
            parallel_for(out.len(), |i| {
                out[i].store((i * i) as i64, Ordering::Relaxed)
            })
            .unwrap();
            assert!(out
                .iter()
                .enumerate()
                .all(|(i, v)| v.load(Ordering::Relaxed) == (i * i) as i64));
        });
    }
}

#[test]
fn barrier_separates_phases() {
    with_threads(4, || {
        for num_task in [2usize, 4, 7] {
            let slots: Vec<AtomicUsize> = (0..num_task).map(|_| AtomicUsize::new(0)).collect();
            parallel_launch(num_task, |ctx| {
                for round in 1..=50 {
                    slots[ctx.task_id()].store(round, Ordering::Relaxed);
                    ctx.barrier()?;
                    // After the barrier every task has written this round.
                    for s in &slots {
                        assert_eq!(s.load(Ordering::Relaxed), round);
                    }
                    ctx.barrier()?;
                }
                Ok(())
            })
            .unwrap();
        }
    });
}

#[test]
fn barrier_through_the_c_entry() {
    struct Phases {
        count: AtomicUsize,
        after: AtomicUsize,
    }
    unsafe extern "C" fn body(
        task: c_int,
        penv: *mut ParallelGroupEnv,
        cdata: *mut c_void,
    ) -> c_int {
        // SAFETY: the launch passes a Phases that outlives it, and a live group env.
        let (p, num_task) = unsafe { (&*(cdata as *const Phases), (*penv).num_task as usize) };
        p.count.fetch_add(1, Ordering::SeqCst);
        // SAFETY: task and penv are this task's own, as the pool passed them.
        if unsafe { TVMBackendParallelBarrier(task, penv) } != 0 {
            return -1;
        }
        if p.count.load(Ordering::SeqCst) == num_task {
            p.after.fetch_add(1, Ordering::SeqCst);
        }
        0
    }
    let p = Phases {
        count: AtomicUsize::new(0),
        after: AtomicUsize::new(0),
    };
    // SAFETY: body only touches atomics.
    let rc = unsafe { TVMBackendParallelLaunch(Some(body), &p as *const Phases as *mut c_void, 5) };
    assert_eq!(rc, 0);
    assert_eq!(p.after.load(Ordering::SeqCst), 5);
    assert_eq!(
        // SAFETY: a NULL env is rejected.
        unsafe { TVMBackendParallelBarrier(0, std::ptr::null_mut()) },
        -1
    );
    kiln_ffi::error::take_raised("test");
}

#[test]
fn nested_launches_run_inline() {
    with_threads(4, || {
        let total = AtomicUsize::new(0);
        parallel_launch(0, |outer| {
            // A launch from inside a task: runs serially here instead of waiting for the pool.
            parallel_for(100, |_| {
                total.fetch_add(1, Ordering::Relaxed);
            })?;
            parallel_launch(0, |inner| {
                assert_eq!(inner.num_task(), 1);
                inner.barrier()
            })?;
            let serial = parallel_launch(3, |inner| inner.barrier());
            assert!(serial.unwrap_err().message().contains("serially"));
            assert!(outer.num_task() == 4);
            Ok(())
        })
        .unwrap();
        assert_eq!(total.load(Ordering::Relaxed), 400);
    });
}

#[test]
fn task_errors_come_back_and_release_the_barrier() {
    let e = expect_err(
        parallel_launch(4, |ctx| {
            if ctx.task_id() == 2 {
                return Err(kiln_ffi::Error::value_error("task two is unhappy"));
            }
            // The others wait at a barrier that task 2 never reaches: they must not hang.
            ctx.barrier()
        }),
        "ValueError",
        "",
    );
    assert!(e.message().starts_with("parallel task 2 of 4"), "{e}");
    assert!(e.message().contains("task two is unhappy"), "{e}");
    assert!(e.message().contains("3 other tasks failed too"), "{e}");

    let e = expect_err(
        parallel_for(10, |i| assert!(i != 7, "seven")),
        "InternalError",
        "",
    );
    assert!(e.message().contains("seven"), "{e}");

    unsafe extern "C" fn fail(_: c_int, _: *mut ParallelGroupEnv, _: *mut c_void) -> c_int {
        -1
    }
    assert_eq!(
        // SAFETY: fail ignores its arguments.
        unsafe { TVMBackendParallelLaunch(Some(fail), std::ptr::null_mut(), 2) },
        -1
    );
    let e = kiln_ffi::error::take_raised("test");
    assert!(e.message().contains("without raising"), "{e}");
    // SAFETY: bad arguments are rejected before anything runs.
    unsafe {
        assert_eq!(TVMBackendParallelLaunch(None, std::ptr::null_mut(), 2), -1);
        kiln_ffi::error::take_raised("test");
        assert_eq!(
            TVMBackendParallelLaunch(Some(fail), std::ptr::null_mut(), -3),
            -1
        );
        assert!(kiln_ffi::error::take_raised("test")
            .message()
            .contains("-3"));
    }
    // The pool still works afterwards.
    assert_eq!(run_sum(2).1, 2);
}

#[test]
fn many_launches_in_a_loop() {
    let counter = AtomicUsize::new(0);
    for _ in 0..20_000 {
        parallel_launch(3, |_| {
            counter.fetch_add(1, Ordering::Relaxed);
            Ok(())
        })
        .unwrap();
    }
    assert_eq!(counter.load(Ordering::Relaxed), 60_000);
}

#[test]
fn launches_from_several_threads_take_turns() {
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(|| {
                for _ in 0..100 {
                    assert_eq!(run_sum(4).1, 4);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn more_tasks_than_threads_still_meet_at_barriers() {
    with_threads(2, || {
        let hits = AtomicUsize::new(0);
        parallel_launch(16, |ctx| {
            hits.fetch_add(1, Ordering::SeqCst);
            ctx.barrier()?;
            assert_eq!(hits.load(Ordering::SeqCst), 16);
            Ok(())
        })
        .unwrap();
        assert!(set_num_threads(100_000).is_err());
    });
}
