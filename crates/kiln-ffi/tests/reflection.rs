//! Reflection through `#[derive(Object)]`: fields by name, parents, printing, JSON and the C view
//! of a type (`TVMFFIGetTypeInfo`).

use kiln_ffi::abi::RawAny;
use kiln_ffi::c_api::{TVMFFIGetTypeInfo, TVMFFITypeKeyToIndex};
use kiln_ffi::reflection::{create_object, field_names, get_field_by_name};
use kiln_ffi::{Any, Array, Object, ObjectRef, ObjectType};

/// A test object type with plain fields.
#[derive(Object)]
#[object(type_key = "test.Point")]
#[repr(C)]
pub struct PointObj {
    /// An integer field, read back through its reflected getter.
    pub x: i64,
    /// A float field.
    pub y: f64,
    /// A string field.
    pub label: String,
}

/// A test object type with a parent and object-valued fields.
#[derive(Object)]
#[object(type_key = "test.Segment", parent = PointObj)]
#[repr(C)]
pub struct SegmentObj {
    /// The parent part, whose fields come first in reflection.
    #[object(base)]
    pub start: PointObj,
    /// An object field.
    pub end: ObjectRef<PointObj>,
    /// An array field.
    pub tags: Array,
    /// A field left out of reflection.
    #[object(skip)]
    pub cache: u64,
}

fn point(x: i64, y: f64, label: &str) -> ObjectRef<PointObj> {
    ObjectRef::new(PointObj {
        x,
        y,
        label: label.into(),
    })
}

#[test]
fn fields_are_read_by_name_parents_first() {
    let seg = ObjectRef::new(SegmentObj {
        start: PointObj {
            x: 1,
            y: 2.5,
            label: "a".into(),
        },
        end: point(3, 4.0, "b"),
        tags: Array::new(vec![Any::from("t")]),
        cache: 99,
    });
    let obj = seg.clone().upcast();
    assert_eq!(field_names(&obj), vec!["x", "y", "label", "end", "tags"]);
    assert_eq!(
        get_field_by_name(&obj, "x")
            .unwrap()
            .try_as::<i64>()
            .unwrap(),
        1
    );
    assert_eq!(
        get_field_by_name(&obj, "label")
            .unwrap()
            .try_as::<String>()
            .unwrap(),
        "a"
    );
    let end = get_field_by_name(&obj, "end")
        .unwrap()
        .try_as::<ObjectRef<PointObj>>()
        .unwrap();
    assert!(end.same_as(&seg.end));
    let e = get_field_by_name(&obj, "cache").unwrap_err();
    assert_eq!(e.kind(), "AttributeError");
    // The child is an instance of its parent.
    let as_point = seg
        .clone()
        .upcast()
        .downcast::<PointObj>()
        .unwrap_or_else(|_| panic!("a segment is a point"));
    assert_eq!(as_point.x, 1);
    assert!(point(0, 0.0, "").upcast().downcast::<SegmentObj>().is_err());
}

#[test]
#[cfg(feature = "json")]
fn printing_and_json_round_trip() {
    use kiln_ffi::json;
    use kiln_ffi::reflection::structural_equal;
    let seg = ObjectRef::new(SegmentObj {
        start: PointObj {
            x: -7,
            y: 0.5,
            label: "start".into(),
        },
        end: point(8, -1.25, "an end label"),
        tags: Array::new(vec![Any::from(1i64), Any::from("two")]),
        cache: 0,
    });
    let text = format!("{seg:?}");
    assert_eq!(
        text,
        r#"test.Segment(x=-7, y=0.5, label="start", end=test.Point(x=8, y=-1.25, label="an end label"), tags=[1, "two"])"#
    );
    let any: Any = seg.into();
    let doc = json::to_json(&any.view()).unwrap();
    let back = json::from_json(&doc).unwrap();
    assert!(structural_equal(&any.view(), &back.view()));
    assert!(!std::ptr::eq(
        any.view().object_ptr().unwrap().as_ptr(),
        back.view().object_ptr().unwrap().as_ptr()
    ));
    let changed = doc.replace("an end label", "another label");
    assert!(!structural_equal(
        &any.view(),
        &json::from_json(&changed).unwrap().view()
    ));
}

#[test]
fn building_from_fields_checks_names_and_types() {
    let ok = create_object(
        "test.Point",
        vec![
            ("x".into(), Any::from(1i64)),
            ("y".into(), Any::from(2.0)),
            ("label".into(), Any::from("p")),
        ],
    )
    .unwrap();
    assert_eq!(ok.try_as::<ObjectRef<PointObj>>().unwrap().label, "p");
    let missing = create_object("test.Point", vec![("x".into(), Any::from(1i64))]).unwrap_err();
    assert!(
        missing.message().contains("needs field `y`"),
        "{}",
        missing.message()
    );
    let wrong = create_object(
        "test.Point",
        vec![
            ("x".into(), Any::from("no")),
            ("y".into(), Any::from(2.0)),
            ("label".into(), Any::from("p")),
        ],
    )
    .unwrap_err();
    assert_eq!(wrong.kind(), "TypeError");
    assert!(
        wrong
            .message()
            .contains("field `x` of `test.Point` expects `int` but got `str`"),
        "{}",
        wrong.message()
    );
    let extra = create_object(
        "test.Point",
        vec![
            ("x".into(), Any::from(1i64)),
            ("y".into(), Any::from(2.0)),
            ("label".into(), Any::from("p")),
            ("z".into(), Any::from(0i64)),
        ],
    )
    .unwrap_err();
    assert!(
        extra.message().contains("has no field `z`"),
        "{}",
        extra.message()
    );
}

#[test]
fn c_type_info_lists_fields_with_getters() {
    let key = kiln_ffi::abi::ByteArray::from_slice(b"test.Segment");
    let mut index = -1;
    // SAFETY: valid arguments.
    assert_eq!(unsafe { TVMFFITypeKeyToIndex(&key, &mut index) }, 0);
    assert_eq!(index, SegmentObj::type_index());
    assert!(index >= 128);
    // SAFETY: the index names a registered type, whose info lives for the whole process.
    let info = unsafe { &*TVMFFIGetTypeInfo(index) };
    // SAFETY: the registry's type keys are valid byte arrays.
    assert_eq!(unsafe { info.type_key.as_slice() }, b"test.Segment");
    assert_eq!(
        info.type_depth, 2,
        "ffi.Object -> test.Point -> test.Segment"
    );
    // SAFETY: type_ancestors holds type_depth (2) entries.
    let parent = unsafe { &**info.type_ancestors.add(1) };
    // SAFETY: as for the type key above.
    assert_eq!(unsafe { parent.type_key.as_slice() }, b"test.Point");
    // SAFETY: fields holds num_fields entries.
    let fields = unsafe { std::slice::from_raw_parts(info.fields, info.num_fields as usize) };
    let names: Vec<&[u8]> = fields
        .iter()
        // SAFETY: the registry's field names are valid byte arrays.
        .map(|f| unsafe { f.name.as_slice() })
        .collect();
    assert_eq!(names, vec![&b"x"[..], b"y", b"label", b"end", b"tags"]);
    let seg = ObjectRef::new(SegmentObj {
        start: PointObj {
            x: 42,
            y: 0.0,
            label: String::new(),
        },
        end: point(0, 0.0, ""),
        tags: Array::empty(),
        cache: 0,
    });
    let base = seg.as_ptr().as_ptr() as *mut u8;
    let mut out = RawAny::NONE;
    // SAFETY: offset and getter come from the registry for this type.
    let rc = unsafe {
        (fields[0].getter.unwrap())(base.add(fields[0].offset as usize) as *mut _, &mut out)
    };
    assert_eq!(rc, 0);
    // SAFETY: the getter succeeded and wrote an owned value to `out`.
    assert_eq!(unsafe { Any::from_raw(out) }.try_as::<i64>().unwrap(), 42);
}

#[cfg(feature = "json")]
#[test]
fn json_keeps_distinct_temporary_field_values_apart() {
    use kiln_ffi::json;
    // Long string fields are read as fresh string objects; each must stay its own node even when
    // the allocator would reuse a freed temporary's address.
    let points: Vec<Any> = (0..50)
        .map(|i| Any::from(point(i, 0.0, &format!("a long label number {i}"))))
        .collect();
    let arr = Array::new(points);
    let doc = json::to_json(&Any::from(arr.clone()).view()).unwrap();
    let back = json::from_json(&doc).unwrap().try_as::<Array>().unwrap();
    for (i, p) in back.iter().enumerate() {
        let p = p.try_as::<ObjectRef<PointObj>>().unwrap();
        assert_eq!(p.label, format!("a long label number {i}"));
    }
}
