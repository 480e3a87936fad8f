//! Reference types through `#[derive(ObjectRef)]`: conversion to `Any` and back (owned and
//! borrowed), subtypes, nullable references, enums of references, the attributes, and the
//! message of a failed downcast.

use kiln_ffi::{Any, AnyView, Object, ObjectRef, TryFromAny};
use std::fmt;

#[derive(Object)]
#[object(type_key = "test.RefPoint")]
#[repr(C)]
/// Payload of a test point object.
pub struct PointObj {
    /// The point's coordinate; also what the `Display` of [`Point`] prints.
    pub x: i64,
}

#[derive(Object)]
#[object(type_key = "test.RefLabeledPoint", parent = PointObj)]
#[repr(C)]
/// Payload of a subtype of [`PointObj`], to test upcasts and downcasts.
pub struct LabeledPointObj {
    /// The parent payload, laid out first as the object layout requires.
    #[object(base)]
    pub base: PointObj,
    /// A label that only the subtype has.
    pub label: String,
}

#[derive(Object)]
#[object(type_key = "test.RefLine")]
#[repr(C)]
/// Payload of a test object unrelated to [`PointObj`], to test failed downcasts.
pub struct LineObj {
    /// Length of the line.
    pub length: f64,
}

/// A plain reference: conversions and the `methods` and `debug_as_display` attributes.
#[derive(Clone, ObjectRef)]
#[object_ref(methods, debug_as_display)]
pub struct Point(ObjectRef<PointObj>);

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Point({})", self.0.x)
    }
}

/// A reference with its own name and a downcast that also accepts integers.
#[derive(Clone, ObjectRef)]
#[object_ref(type_name = "test.PointLike", try_from_view = Coord::from_view)]
pub struct Coord(ObjectRef<PointObj>);

impl Coord {
    fn from_view(v: &AnyView<'_>) -> Option<Coord> {
        match i64::try_from_view(v) {
            Some(x) => Some(Coord(ObjectRef::new(PointObj { x }))),
            None => ObjectRef::<PointObj>::try_from_view(v).map(Coord),
        }
    }
}

/// An enum of references.
#[derive(Clone, ObjectRef)]
#[object_ref(type_name = "test.Shape")]
pub enum Shape {
    /// A point object.
    Point(Point),
    /// A line object.
    Line(ObjectRef<LineObj>),
}

fn point(x: i64) -> Point {
    Point(ObjectRef::new(PointObj { x }))
}

#[test]
fn a_reference_goes_to_any_and_back() {
    let p = point(3);
    let any = Any::from(p.clone());
    assert_eq!(p.object().strong_count(), 2);
    let back: Point = any.try_as().unwrap();
    assert!(back.same_as(&p));
    assert_eq!(back.object().x, 3);
    // Borrowed values downcast the same way.
    let view: AnyView<'_> = any.view();
    assert!(view.try_as::<Point>().unwrap().same_as(&p));
    assert_eq!(Point::type_name(), "test.RefPoint");
    assert_eq!(format!("{p:?}"), "Point(3)");
}

#[test]
fn a_subtype_downcasts_to_its_parent_reference() {
    let labeled = ObjectRef::new(LabeledPointObj {
        base: PointObj { x: 7 },
        label: "seven".into(),
    });
    let p: Point = Any::from(labeled).try_as().unwrap();
    assert_eq!(p.object().x, 7);
}

#[test]
fn a_failed_downcast_names_both_types() {
    let err = Any::from(5i64).try_as::<Point>().unwrap_err();
    assert_eq!(err.kind(), "TypeError");
    assert_eq!(err.message(), "expected `test.RefPoint` but got `int`");
    let line = ObjectRef::new(LineObj { length: 1.0 });
    let err = Any::from(line).try_as::<Point>().unwrap_err();
    assert_eq!(
        err.message(),
        "expected `test.RefPoint` but got `test.RefLine`"
    );
}

#[test]
fn nullable_references_are_options() {
    let none: Option<Point> = None;
    let any = Any::from(none);
    assert!(any.is_none());
    assert!(any.try_as::<Option<Point>>().unwrap().is_none());
    assert!(any.try_as::<Point>().is_err());
    let some = Any::from(Some(point(1)));
    assert_eq!(
        some.try_as::<Option<Point>>().unwrap().unwrap().object().x,
        1
    );
    assert_eq!(<Option<Point>>::type_name(), "Optional[test.RefPoint]");
}

#[test]
fn attributes_name_the_type_and_replace_the_downcast() {
    let c: Coord = Any::from(9i64).try_as().unwrap();
    assert_eq!(c.0.x, 9);
    let again: Coord = Any::from(c.clone()).try_as().unwrap();
    assert!(again.0.same_as(&c.0));
    let err = Any::from("nine").try_as::<Coord>().err().unwrap();
    assert_eq!(err.message(), "expected `test.PointLike` but got `str`");
}

#[test]
fn an_enum_converts_whichever_variant_it_holds() {
    let line = ObjectRef::new(LineObj { length: 2.5 });
    match Any::from(Shape::Line(line.clone()))
        .try_as::<Shape>()
        .unwrap()
    {
        Shape::Line(l) => assert!(l.same_as(&line)),
        Shape::Point(_) => panic!("a line came back as a point"),
    }
    let p = point(4);
    match Any::from(Shape::Point(p.clone()))
        .try_as::<Shape>()
        .unwrap()
    {
        Shape::Point(q) => assert!(q.same_as(&p)),
        Shape::Line(_) => panic!("a point came back as a line"),
    }
    let err = Any::from(1.5f64).try_as::<Shape>().err().unwrap();
    assert_eq!(err.message(), "expected `test.Shape` but got `float`");
}
