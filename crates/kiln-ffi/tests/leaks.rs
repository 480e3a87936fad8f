//! Reference-count soundness: a million create/copy/drop cycles of each object kind leave no
//! live object behind. Needs the `count-objects` feature (`cargo test --features count-objects
//! --test leaks`); without it the counter is always zero and the test checks nothing.

use kiln_ffi::object::live_object_count;
use kiln_ffi::{Any, Array, Bytes, Error, Function, Map, Shape, Str};

const CYCLES: usize = 1_000_000;

fn cycle<T: Clone + Into<Any>>(make: impl Fn(usize) -> T) {
    let before = live_object_count();
    for i in 0..CYCLES {
        let a = make(i);
        let b = a.clone();
        let any: Any = b.into();
        let c = any.clone();
        drop(any);
        drop(a);
        drop(c);
    }
    assert_eq!(live_object_count(), before, "objects leaked or freed twice");
}

#[test]
fn million_cycles_of_each_kind_leave_nothing_alive() {
    if !cfg!(feature = "count-objects") {
        eprintln!("count-objects feature off: nothing to check");
        return;
    }
    // The registry's start-up functions live for the whole process: create them first.
    let echo = kiln_ffi::registry::get("testing.echo").unwrap();
    let base = live_object_count();
    cycle(|i| {
        Str::new(if i % 2 == 0 {
            "a string that is long"
        } else {
            "short"
        })
    });
    cycle(|_| Bytes::from_bytes(b"some bytes here"));
    cycle(|i| Shape::new(&[i as i64, 2, 3]));
    cycle(|i| Array::new(vec![Any::from(i as i64), Any::from("nested string object")]));
    cycle(|i| Map::new(vec![(Any::from("key"), Any::from(i as i64))]));
    cycle(|i| Error::value_error(format!("error {i}")));
    cycle(|i| Function::from_typed(move |x: i64| x + i as i64));
    // Calls that create and drop values on both sides of the ABI.
    let before = live_object_count();
    for i in 0..CYCLES / 10 {
        let arr = Array::new(vec![
            Any::from(i as i64),
            Any::from(Str::new("string object in array")),
        ]);
        let out = kiln_ffi::call!(echo, arr).unwrap();
        assert_eq!(out.try_as::<Array>().unwrap().len(), 2);
    }
    assert_eq!(live_object_count(), before, "calls leaked objects");
    assert_eq!(live_object_count(), base);
}
