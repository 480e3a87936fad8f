//! Derive macros for Kiln's FFI.
//!
//! `#[derive(Object)]` declares an FFI object type once: its type key, its parent, and its
//! fields. The type can then be allocated as an `ObjectRef`, and its fields read by name from
//! Rust, C (`TVMFFIGetTypeInfo`) and Python, printed, compared and serialized to JSON.
//!
//! ```ignore
//! #[derive(Object)]
//! #[object(type_key = "my.Point")]
//! #[repr(C)]
//! pub struct PointObj { pub x: i64, pub y: f64 }
//!
//! #[derive(Object)]
//! #[object(type_key = "my.NamedPoint", parent = PointObj)]
//! #[repr(C)]
//! pub struct NamedPointObj { #[object(base)] pub base: PointObj, pub name: String }
//! ```
//! Field types implement `kiln_ffi::reflection::FieldValue` (any type that converts to and
//! from `Any`). A field marked `#[object(skip)]` is not reflected and is rebuilt with `Default`.
//!
//! `#[derive(ObjectRef)]` writes the value conversions of a reference type (a handle such as
//! `pub struct Point(ObjectRef<PointObj>)`, or an enum of handles): `From<Point> for Any` and
//! `TryFromAny for Point`; see [`macro@ObjectRef`].

use proc_macro::TokenStream;
use quote::quote;
use syn::{parse_macro_input, Data, DeriveInput, Fields, LitStr, Path, Type};

/// Declares an FFI object type with reflected fields; see the crate documentation.
#[proc_macro_derive(Object, attributes(object))]
pub fn derive_object(input: TokenStream) -> TokenStream {
    derive_with(input, expand)
}

/// Parses a derive's input and expands it with `f`, turning its error into a compile error.
fn derive_with(
    input: TokenStream,
    f: fn(DeriveInput) -> syn::Result<proc_macro2::TokenStream>,
) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    f(input).unwrap_or_else(|e| e.to_compile_error()).into()
}

#[derive(Default)]
struct FieldAttrs {
    base: bool,
    skip: bool,
}

/// Calls `f` on each item of every `#[name(...)]` attribute in `attrs`.
fn for_each_meta(
    attrs: &[syn::Attribute],
    name: &str,
    mut f: impl FnMut(syn::meta::ParseNestedMeta<'_>) -> syn::Result<()>,
) -> syn::Result<()> {
    for attr in attrs.iter().filter(|a| a.path().is_ident(name)) {
        attr.parse_nested_meta(&mut f)?;
    }
    Ok(())
}

fn field_attrs(attrs: &[syn::Attribute]) -> syn::Result<FieldAttrs> {
    let mut out = FieldAttrs::default();
    for_each_meta(attrs, "object", |meta| {
        if meta.path.is_ident("base") {
            out.base = true;
            Ok(())
        } else if meta.path.is_ident("skip") {
            out.skip = true;
            Ok(())
        } else {
            Err(meta.error("expected `base` or `skip`"))
        }
    })?;
    Ok(out)
}

fn expand(input: DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    let name = &input.ident;
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &input.generics,
            "FFI object types cannot be generic",
        ));
    }
    let mut type_key: Option<LitStr> = None;
    let mut parent: Option<Path> = None;
    for_each_meta(&input.attrs, "object", |meta| {
        if meta.path.is_ident("type_key") {
            type_key = Some(meta.value()?.parse()?);
            Ok(())
        } else if meta.path.is_ident("parent") {
            parent = Some(meta.value()?.parse()?);
            Ok(())
        } else {
            Err(meta.error("expected `type_key = \"...\"` or `parent = Type`"))
        }
    })?;
    let type_key = type_key
        .ok_or_else(|| syn::Error::new_spanned(name, "missing #[object(type_key = \"...\")]"))?;
    let has_repr_c = input.attrs.iter().any(|a| {
        a.path().is_ident("repr")
            && a.meta
                .require_list()
                .map(|l| l.tokens.to_string().contains('C'))
                .unwrap_or(false)
    });
    if !has_repr_c {
        return Err(syn::Error::new_spanned(
            name,
            "FFI object types must be #[repr(C)]",
        ));
    }
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(
            name,
            "only structs can be FFI objects",
        ));
    };
    let Fields::Named(fields) = &data.fields else {
        return Err(syn::Error::new_spanned(
            name,
            "FFI objects need named fields",
        ));
    };

    let mut descs = Vec::new();
    let mut inits = Vec::new();
    let mut saw_base = false;
    for (i, f) in fields.named.iter().enumerate() {
        let ident = f.ident.as_ref().expect("named field");
        let ty = &f.ty;
        let attrs = field_attrs(&f.attrs)?;
        let field_name = LitStr::new(&ident.to_string(), ident.span());
        if attrs.base {
            if i != 0 || parent.is_none() {
                return Err(syn::Error::new_spanned(
                    ident,
                    "#[object(base)] must be the first field and needs `parent = ...`",
                ));
            }
            saw_base = true;
            inits.push(quote! { #ident: <#ty as ::kiln_ffi::reflection::Reflect>::from_field_values(values)? });
        } else if attrs.skip {
            inits.push(quote! { #ident: ::core::default::Default::default() });
        } else {
            descs.push(quote! {
                ::kiln_ffi::reflection::FieldDesc::of::<#ty>(#field_name, ::core::mem::offset_of!(#name, #ident))
            });
            inits.push(quote! { #ident: values.take::<#ty>(#field_name)? });
        }
    }
    if parent.is_some() && !saw_base {
        return Err(syn::Error::new_spanned(
            name,
            "a type with a parent needs its first field marked #[object(base)]",
        ));
    }
    let parent_key = match &parent {
        Some(p) => quote! { <#p as ::kiln_ffi::ObjectType>::TYPE_KEY },
        None => quote! { "ffi.Object" },
    };

    Ok(quote! {
        unsafe impl ::kiln_ffi::ObjectType for #name {
            const TYPE_KEY: &'static str = #type_key;
            fn type_index() -> i32 {
                static INDEX: ::std::sync::OnceLock<i32> = ::std::sync::OnceLock::new();
                *INDEX.get_or_init(|| {
                    ::kiln_ffi::type_registry::index_of_key(#type_key)
                        .expect("declared object types are registered on first use of the registry")
                })
            }
        }

        impl ::kiln_ffi::reflection::Reflect for #name {
            fn own_fields() -> ::std::vec::Vec<::kiln_ffi::reflection::FieldDesc> {
                ::std::vec![#(#descs),*]
            }
            fn from_field_values(values: &mut ::kiln_ffi::reflection::FieldValues) -> ::kiln_ffi::Result<Self> {
                Ok(#name { #(#inits),* })
            }
        }

        ::kiln_ffi::inventory::submit! {
            ::kiln_ffi::reflection::TypeDesc {
                key: #type_key,
                parent_key: #parent_key,
                fields: <#name as ::kiln_ffi::reflection::Reflect>::own_fields,
                create: ::core::option::Option::Some(::kiln_ffi::reflection::create_reflected::<#name>),
            }
        }
    })
}

/// Writes the conversions between a reference type and `kiln_ffi::Any`: the glue that TVM-FFI's
/// `TVM_FFI_DEFINE_OBJECT_REF_METHODS` macros write for an `ObjectRef` subclass.
///
/// On a struct with one unnamed field, `struct Point(ObjectRef<PointObj>)` (or any field type
/// that converts to and from `Any`, such as `Str`), it generates
/// - `impl From<Point> for kiln_ffi::Any`, which moves the field's reference into the value;
/// - `impl kiln_ffi::TryFromAny for Point`, the downcast that `Any::try_as::<Point>()` and
///   `AnyView::try_as::<Point>()` (owned and borrowed values alike) and typed function arguments
///   use: it accepts what the field type accepts (for `ObjectRef<T>`, an object of type `T` or a
///   subtype, checked through the type registry), and its `type_name` is the field's (for
///   `ObjectRef<T>`, `T::TYPE_KEY`), so a failed downcast says
///   ``expected `my.Point` but got `int` ``.
///
/// On an enum whose variants each hold one value (`enum Expr { Call(ObjectRef<CallObj>),
/// Var(Var) }`), `From` converts whichever variant it is, and the downcast tries the variants in
/// the order they are declared; the enum needs `type_name`.
///
/// A nullable reference is `Option<Point>`: `None` converts to and from the `None` value through
/// the blanket impls of `Option<T>`.
///
/// Attributes, all in `#[object_ref(...)]` on the type:
/// - `type_name = "..."`: the name in messages and signatures instead of the field's;
/// - `try_from_view = path`: the downcast is `path(&AnyView) -> Option<Self>` (for handles that
///   accept more than their objects, e.g. literals or `DLTensor*` pointers);
/// - `methods` (structs over `ObjectRef<T>` only): also `pub fn object(&self) -> &ObjectRef<T>`
///   and `pub fn same_as(&self, other: &Self) -> bool` (identity);
/// - `debug_as_display`: also a `Debug` impl that prints the `Display` form.
///
/// The generated code names `::kiln_ffi`; inside kiln-ffi itself, `extern crate self as
/// kiln_ffi;` makes that path resolve.
///
/// ```ignore
/// #[derive(Clone, ObjectRef)]
/// pub struct Point(ObjectRef<PointObj>);
///
/// #[derive(Clone, ObjectRef)]
/// #[object_ref(type_name = "my.Shape")]
/// pub enum ShapeRef { Point(Point), Line(ObjectRef<LineObj>) }
/// ```
#[proc_macro_derive(ObjectRef, attributes(object_ref))]
pub fn derive_object_ref(input: TokenStream) -> TokenStream {
    derive_with(input, expand_object_ref)
}

#[derive(Default)]
struct RefAttrs {
    type_name: Option<LitStr>,
    try_from_view: Option<Path>,
    methods: bool,
    debug_as_display: bool,
}

fn ref_attrs(attrs: &[syn::Attribute]) -> syn::Result<RefAttrs> {
    let mut out = RefAttrs::default();
    for_each_meta(attrs, "object_ref", |meta| {
        if meta.path.is_ident("type_name") {
            out.type_name = Some(meta.value()?.parse()?);
        } else if meta.path.is_ident("try_from_view") {
            out.try_from_view = Some(meta.value()?.parse()?);
        } else if meta.path.is_ident("methods") {
            out.methods = true;
        } else if meta.path.is_ident("debug_as_display") {
            out.debug_as_display = true;
        } else {
            return Err(meta.error(
                "expected `type_name = \"...\"`, `try_from_view = path`, `methods` or \
                 `debug_as_display`",
            ));
        }
        Ok(())
    })?;
    Ok(out)
}

/// The type of the single unnamed field of `fields`.
fn single_field<'a>(fields: &'a Fields, what: &dyn quote::ToTokens) -> syn::Result<&'a Type> {
    match fields {
        Fields::Unnamed(f) if f.unnamed.len() == 1 => Ok(&f.unnamed[0].ty),
        _ => Err(syn::Error::new_spanned(
            what,
            "#[derive(ObjectRef)] needs exactly one unnamed field (the reference)",
        )),
    }
}

/// `T` when `ty` is written `ObjectRef<T>` (with any path in front).
fn object_ref_target(ty: &Type) -> Option<&Type> {
    let Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    if last.ident != "ObjectRef" {
        return None;
    }
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match args.args.first()? {
        syn::GenericArgument::Type(t) if args.args.len() == 1 => Some(t),
        _ => None,
    }
}

fn expand_object_ref(input: DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    let name = &input.ident;
    let attrs = ref_attrs(&input.attrs)?;
    let (impl_g, ty_g, where_g) = input.generics.split_for_impl();
    let ffi = quote! { ::kiln_ffi };

    let (into_any, from_view, field_type_name, field_ty) = match &input.data {
        Data::Struct(data) => {
            let ty = single_field(&data.fields, name)?;
            // For `ObjectRef<T>`, the name is `T`'s type key (what the field's `type_name` says,
            // without the call).
            let type_name = match object_ref_target(ty) {
                Some(obj) => quote! {
                    ::std::string::String::from(<#obj as #ffi::ObjectType>::TYPE_KEY)
                },
                None => quote! { <#ty as #ffi::TryFromAny>::type_name() },
            };
            (
                quote! { ::core::convert::From::from(v.0) },
                quote! { <#ty as #ffi::TryFromAny>::try_from_view(v).map(#name) },
                Some(type_name),
                Some(ty),
            )
        }
        Data::Enum(data) => {
            let mut arms = Vec::new();
            let mut tries = Vec::new();
            for variant in &data.variants {
                let ty = single_field(&variant.fields, variant)?;
                let v = &variant.ident;
                arms.push(quote! { #name::#v(r) => ::core::convert::From::from(r) });
                tries.push(quote! {
                    if let ::core::option::Option::Some(r) = <#ty as #ffi::TryFromAny>::try_from_view(v) {
                        return ::core::option::Option::Some(#name::#v(r));
                    }
                });
            }
            if attrs.methods {
                return Err(syn::Error::new_spanned(
                    name,
                    "`methods` is for structs over an `ObjectRef<T>`",
                ));
            }
            (
                quote! { match v { #(#arms,)* } },
                quote! {{ #(#tries)* ::core::option::Option::None }},
                None,
                None,
            )
        }
        Data::Union(_) => {
            return Err(syn::Error::new_spanned(
                name,
                "#[derive(ObjectRef)] is for structs and enums",
            ))
        }
    };
    let type_name = match (&attrs.type_name, field_type_name) {
        (Some(lit), _) => quote! { ::std::string::String::from(#lit) },
        (None, Some(t)) => t,
        (None, None) => {
            return Err(syn::Error::new_spanned(
                name,
                "an enum needs #[object_ref(type_name = \"...\")]",
            ))
        }
    };
    let from_view = match &attrs.try_from_view {
        Some(path) => quote! { #path(v) },
        None => from_view,
    };

    let mut out = quote! {
        impl #impl_g ::core::convert::From<#name #ty_g> for #ffi::Any #where_g {
            #[inline]
            fn from(v: #name #ty_g) -> #ffi::Any {
                #into_any
            }
        }

        impl #impl_g #ffi::TryFromAny for #name #ty_g #where_g {
            // Not #[inline]: a type-registry check, and one copy keeps the deploy runtime small.
            fn try_from_view(v: &#ffi::AnyView<'_>) -> ::core::option::Option<Self> {
                #from_view
            }
            fn type_name() -> ::std::string::String {
                #type_name
            }
        }
    };
    if attrs.methods {
        let ty = field_ty.expect("structs have a field type");
        out.extend(quote! {
            impl #impl_g #name #ty_g #where_g {
                /// The underlying object reference.
                #[inline]
                pub fn object(&self) -> &#ty {
                    &self.0
                }

                /// True when both handles point to the same object.
                #[inline]
                pub fn same_as(&self, other: &Self) -> bool {
                    self.0.same_as(&other.0)
                }
            }
        });
    }
    if attrs.debug_as_display {
        out.extend(quote! {
            impl #impl_g ::core::fmt::Debug for #name #ty_g #where_g {
                fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                    ::core::fmt::Display::fmt(self, f)
                }
            }
        });
    }
    Ok(out)
}
