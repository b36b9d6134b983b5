//! `#[object(save)]`: the code that writes and reads a class's fields in a
//! package (see `coreobject::save`).
//!
//! Type options: `save`, `version = N`, `migrate = path`,
//! `rename_from = "Old"` (repeatable). Field options: `transient`,
//! `default = path`, `rename_from = "old"` (repeatable).

use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;
use syn::{Attribute, Data, DeriveInput, Error, Fields, LitInt, LitStr, Path, Result};

/// A class's save options.
#[derive(Default)]
struct TypeSave {
    on: bool,
    version: Option<LitInt>,
    migrate: Option<Path>,
    rename_from: Vec<LitStr>,
}

/// Consumes a type-level save option; `false` if `meta` is not one.
pub(crate) fn type_option(meta: &ParseNestedMeta<'_>, is_object: bool) -> Result<bool> {
    let ours = ["save", "version", "migrate", "rename_from"]
        .iter()
        .any(|n| meta.path.is_ident(n));
    if !ours {
        return Ok(false);
    }
    if !is_object {
        return Err(meta.error("save options are for object classes (`#[derive(Object)]`)"));
    }
    if !meta.path.is_ident("save") {
        // `version = 2`, `migrate = f`, `rename_from = "Old"`: the value is
        // read again by `expand`.
        let _: syn::Expr = meta.value()?.parse()?;
    }
    Ok(true)
}

/// Consumes a field-level save option; `false` if `meta` is not one.
pub(crate) fn field_option(meta: &ParseNestedMeta<'_>) -> Result<bool> {
    if meta.path.is_ident("transient") {
        return Ok(true);
    }
    if meta.path.is_ident("default") || meta.path.is_ident("rename_from") {
        let _: syn::Expr = meta.value()?.parse()?;
        return Ok(true);
    }
    Ok(false)
}

fn type_save(attrs: &[Attribute]) -> Result<TypeSave> {
    let mut t = TypeSave::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("object")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("save") {
                t.on = true;
            } else if meta.path.is_ident("version") {
                t.version = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("migrate") {
                t.migrate = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("rename_from") {
                t.rename_from.push(meta.value()?.parse()?);
            } else if meta.input.peek(syn::Token![=]) {
                let _: syn::Expr = meta.value()?.parse()?;
            }
            Ok(())
        })?;
    }
    let stray = t.version.is_some() || t.migrate.is_some() || !t.rename_from.is_empty();
    if stray && !t.on {
        return Err(Error::new(
            attrs[0].span(),
            "`version`, `migrate` and `rename_from` need `#[object(save)]`",
        ));
    }
    Ok(t)
}

/// A field's save options.
#[derive(Default)]
struct FieldSave {
    transient: bool,
    default: Option<Path>,
    rename_from: Vec<LitStr>,
}

fn field_save(attrs: &[Attribute]) -> Result<FieldSave> {
    let mut f = FieldSave::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("object")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("transient") {
                f.transient = true;
            } else if meta.path.is_ident("default") {
                f.default = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("rename_from") {
                f.rename_from.push(meta.value()?.parse()?);
            }
            Ok(())
        })?;
    }
    Ok(f)
}

/// For an object class: the `SaveObject` impl, the `static` the class
/// points at (to be put beside the class's own) and the expression for
/// `ClassDesc::save`; without `#[object(save)]`, none and `None`.
pub(crate) fn expand(input: &DeriveInput) -> Result<(TokenStream2, TokenStream2, TokenStream2)> {
    let t = type_save(&input.attrs)?;
    if !t.on {
        return Ok((quote!(), quote!(), quote!(::core::option::Option::None)));
    }
    let ident = &input.ident;
    let fields = match &input.data {
        Data::Struct(s) => &s.fields,
        _ => {
            return Err(Error::new(
                ident.span(),
                "`#[object(save)]` supports structs; an enum can be saved as a field of one",
            ))
        }
    };
    let mut saved = Vec::new();
    let mut writes = Vec::new();
    let mut inits = Vec::new();
    let mut i = 0usize;
    for (pos, f) in fields.iter().enumerate() {
        let opts = field_save(&f.attrs)?;
        let (name, access) = match &f.ident {
            Some(id) => {
                let s = id.to_string();
                (s.strip_prefix("r#").unwrap_or(&s).to_string(), quote!(#id))
            }
            None => {
                let idx = syn::Index::from(pos);
                (pos.to_string(), quote!(#idx))
            }
        };
        if opts.transient {
            inits.push(match &opts.default {
                Some(p) => quote!(#p()),
                None => quote!(::core::default::Default::default()),
            });
            continue;
        }
        let ty = &f.ty;
        let default = match &opts.default {
            Some(p) => quote!(#p()),
            // The type's `Default` if it has one; else a file without the
            // field is an error.
            None => quote! {{
                #[allow(unused_imports)]
                use ::coreobject::save::__default::{Has as _, Lacks as _};
                match (&::coreobject::save::__default::Probe::<#ty>(::core::marker::PhantomData)).get() {
                    ::core::option::Option::Some(__d) => __d(),
                    ::core::option::Option::None => {
                        return ::core::result::Result::Err(::coreobject::save::FieldError::custom(
                            #name,
                            "not in the file, and its type has no Default: give it #[object(default = f)]",
                        ))
                    }
                }
            }},
        };
        let olds = &opts.rename_from;
        saved.push(quote! {
            ::coreobject::save::SavedField { name: #name, rename_from: &[#(#olds),*] }
        });
        writes.push(quote!(__w.field(&self.#access)?;));
        inits.push(quote! {
            match __r.field(#i)? {
                ::core::option::Option::Some(__x) => __x,
                ::core::option::Option::None => #default,
            }
        });
        i += 1;
    }
    let build = match fields {
        Fields::Named(_) => {
            let names = fields.iter().map(|f| f.ident.as_ref().expect("named"));
            quote!(Self { #(#names: #inits,)* })
        }
        Fields::Unnamed(_) => quote!(Self( #(#inits,)* )),
        Fields::Unit => quote!(Self),
    };
    let version = match &t.version {
        Some(v) => quote!(#v),
        None => quote!(1),
    };
    let migrate = match &t.migrate {
        Some(p) => quote! {
            if __r.version() != <Self as ::coreobject::save::SaveObject>::VERSION {
                #p(&mut __value, __r)?;
            }
        },
        None => quote!(),
    };
    let olds = &t.rename_from;
    let tokens = quote! {
        impl ::coreobject::save::SaveObject for #ident {
            const VERSION: u32 = #version;
            const FIELDS: &'static [::coreobject::save::SavedField] = &[#(#saved),*];
            const RENAMED_FROM: &'static [&'static str] = &[#(#olds),*];
            fn save_fields(
                &self,
                __w: &mut ::coreobject::save::FieldWriter<'_>,
            ) -> ::core::result::Result<(), ::coreobject::save::SaveError> {
                #(#writes)*
                ::core::result::Result::Ok(())
            }
            #[allow(unused_variables)]
            fn load_fields(
                __r: &mut ::coreobject::save::FieldReader<'_>,
            ) -> ::core::result::Result<Self, ::coreobject::save::FieldError> {
                #[allow(unused_mut)]
                let mut __value = #build;
                #migrate
                ::core::result::Result::Ok(__value)
            }
        }
    };
    let statics = quote! {
        static __SAVE: ::coreobject::save::SaveVtable =
            ::coreobject::save::SaveVtable::new::<#ident>();
    };
    let desc = quote!(::core::option::Option::Some(&__SAVE));
    Ok((tokens, statics, desc))
}
