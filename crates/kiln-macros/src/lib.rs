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

use proc_macro::TokenStream;
use quote::quote;
use syn::{parse_macro_input, Data, DeriveInput, Fields, LitStr, Path};

/// Declares an FFI object type with reflected fields; see the crate documentation.
#[proc_macro_derive(Object, attributes(object))]
pub fn derive_object(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

#[derive(Default)]
struct FieldAttrs {
    base: bool,
    skip: bool,
}

fn field_attrs(attrs: &[syn::Attribute]) -> syn::Result<FieldAttrs> {
    let mut out = FieldAttrs::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("object")) {
        attr.parse_nested_meta(|meta| {
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
    }
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
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("object")) {
        attr.parse_nested_meta(|meta| {
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
    }
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
