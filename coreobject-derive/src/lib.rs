//! Derive macros for `coreobject`: `#[derive(Object)]` and `#[derive(Trace)]`.
//!
//! Use them through `coreobject` (`use coreobject::{Object, Trace};`): the
//! macros expand to paths under `::coreobject`. Each macro's own
//! documentation (also shown as `coreobject::Object` and
//! `coreobject::Trace`) has the attribute table; the `coreobject` crate
//! docs have runnable examples.

mod save;

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{
    parse_macro_input, Attribute, Data, DeriveInput, Error, Fields, GenericParam, Ident, LitStr,
    Path, Result, Type,
};

mod data;

/// Makes a struct or enum an object class: registers its name, its full
/// path (`module_path!()::Type`), its reflected fields and, when the type
/// implements `Default`, a class default object; writes its `Trace`
/// implementation and, unless `#[object(lifecycle)]`, an empty `Lifecycle`
/// (Unreal's `UCLASS` with `UPROPERTY` on every field).
///
/// **Every field is traced**: a handle field (`Obj<T>`, `AnyObj`, or one
/// inside a `Vec`, `Option`, `HashMap`, `Box`, a lock, a tuple, a
/// `#[derive(Trace)]` struct, ...) keeps its target alive without any
/// annotation. A field opts out only with `#[object(skip)]`, or by being a
/// `Weak<T>`, which is never traced. Every field's type must implement
/// `Trace`; the compiler error for one that does not says how to fix it.
///
/// `Object` is an `unsafe trait` (a class that answered for another type
/// would make the heap read one type as another). The derive writes the
/// `unsafe impl` and keeps its contract, so using it needs no `unsafe` from
/// you, even under `#![forbid(unsafe_code)]`. Generic types cannot be
/// classes (a class is one concrete type); derive `Trace` for a generic
/// struct held inside objects instead.
///
/// # Attributes
///
/// | where | attribute | meaning |
/// |---|---|---|
/// | type | `#[object(name = "Weapon")]` | the class name (default: the type name) |
/// | type | `#[object(lifecycle)]` | you implement `Lifecycle` yourself (destruction hooks: `begin_destroy`, `is_ready_for_finish_destroy`, `finish_destroy`) |
/// | type | `#[object(trace_with = path)]` | also call `path(&self, visitor)` when tracing (Unreal's `AddReferencedObjects`), for handles the fields do not show, such as packed bits in a skipped field; the class then counts as interior-mutable (what `path` reads may change behind `&self`, so incremental marking re-scans the object whenever the program borrows it) |
/// | type | `#[object(interior_mut = false)]` | with `trace_with`: what `path` reads never changes behind `&self` (no re-scan on borrow); `= true` declares the opposite for any class |
/// | type | `#[object(cluster = false)]` | objects of the class never join a GC cluster (Unreal's `CanBeInCluster`) |
/// | field | `#[object(skip)]` | never trace this field; its type need not implement `Trace` |
/// | type | `#[object(save)]` | objects of the class can be saved and loaded (`coreobject::save`); every field not `transient` needs serde's `Serialize` and `Deserialize` |
/// | type | `#[object(version = 2, migrate = f, rename_from = "Old")]` | with `save`: the layout version, the hook run on files of another version, and old class names |
/// | field | `#[object(transient)]`, `#[object(default = f)]`, `#[object(rename_from = "old")]` | with `save`: not saved (loads as `Default`); `f()` when a file lacks the field; the field's old names |
///
/// Examples: the `coreobject` crate docs (a first heap, `trace_with`) and
/// `coreobject::Lifecycle` (destruction hooks).
#[proc_macro_derive(Object, attributes(object))]
pub fn derive_object(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand(input, true)
        .unwrap_or_else(Error::into_compile_error)
        .into()
}

/// Writes `Trace` for a plain struct or enum that lives inside objects
/// (Unreal's `USTRUCT`): it reports every field, as `#[derive(Object)]`
/// does, so an `Obj<T>` inside it keeps its target alive. Generic types are
/// allowed (each type parameter must then implement `Trace`).
///
/// # Attributes
///
/// | where | attribute | meaning |
/// |---|---|---|
/// | type | `#[object(trace_with = path)]` | also call `path(&self, visitor)` when tracing (Unreal's `AddReferencedObjects`); the type then counts as interior-mutable |
/// | type | `#[object(interior_mut = false)]` | with `trace_with`: what `path` reads never changes behind `&self`; `= true` declares the opposite |
/// | field | `#[object(skip)]` | never trace this field; its type need not implement `Trace` |
///
/// `name` and `lifecycle` are for object classes only (`#[derive(Object)]`).
#[proc_macro_derive(Trace, attributes(object))]
pub fn derive_trace(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand(input, false)
        .unwrap_or_else(Error::into_compile_error)
        .into()
}

/// Writes the data door of an object class: a view struct named after the
/// class with `Data` appended (`Actor` → `ActorData`) that holds `&mut` to
/// each field whose type cannot hold strong handles, and a sealed
/// placeholder for each one that can, and `coreobject::Data` returning it.
/// `Heap::data_mut` hands the view out without the write barrier. The
/// compiler decides each field from its type's `Trace::NEEDS_TRACE`, so a
/// handle can never be stored through the door. Named-field structs only;
/// not with `#[object(trace_with = …)]`. Examples: `coreobject::Data`.
#[proc_macro_derive(Data)]
pub fn derive_data(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    data::expand(input)
        .unwrap_or_else(Error::into_compile_error)
        .into()
}

/// Type-level options.
#[derive(Default)]
struct TypeOpts {
    name: Option<LitStr>,
    lifecycle: bool,
    trace_with: Option<Path>,
    /// `interior_mut = true | false`: overrides what the class declares.
    interior_mut: Option<bool>,
    /// `cluster = false`: the class's objects never join a GC cluster.
    no_cluster: bool,
}

fn type_opts(attrs: &[Attribute], is_object: bool) -> Result<TypeOpts> {
    let mut opts = TypeOpts::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident("object")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("name") && is_object {
                opts.name = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("lifecycle") && is_object {
                opts.lifecycle = true;
            } else if meta.path.is_ident("trace_with") {
                opts.trace_with = Some(meta.value()?.parse()?);
            } else if meta.path.is_ident("cluster") && is_object {
                let lit: syn::LitBool = meta.value()?.parse()?;
                opts.no_cluster = !lit.value;
            } else if meta.path.is_ident("interior_mut") {
                let lit: syn::LitBool = meta.value()?.parse()?;
                opts.interior_mut = Some(lit.value);
            } else if save::type_option(&meta, is_object)? {
                // `save`, `version`, `migrate`, `rename_from`: see save.rs.
            } else if meta.path.is_ident("skip") {
                return Err(meta.error("`#[object(skip)]` goes on a field, not on the type"));
            } else {
                let allowed = if is_object {
                    "`name = \"…\"`, `lifecycle`, `trace_with = path`, `interior_mut = bool` or `cluster = bool`"
                } else {
                    "`trace_with = path` or `interior_mut = bool`"
                };
                return Err(meta.error(format!("unknown `object` option; expected {allowed}")));
            }
            Ok(())
        })?;
    }
    Ok(opts)
}

/// Whether a field carries `#[object(skip)]`.
fn is_skipped(attrs: &[Attribute]) -> Result<bool> {
    let mut skip = false;
    for attr in attrs.iter().filter(|a| a.path().is_ident("object")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("skip") {
                skip = true;
                Ok(())
            } else if save::field_option(&meta)? {
                Ok(())
            } else {
                Err(meta.error("unknown field option; the only one is `#[object(skip)]`"))
            }
        })?;
    }
    Ok(skip)
}

/// One field, wherever it sits (struct or enum variant).
struct Field {
    /// How the trace code names it (`self.x`, or a binding in a match arm).
    access: TokenStream2,
    /// The path segment reported to visitors.
    seg: TokenStream2,
    /// The name in the reflection table.
    name: String,
    ty: Type,
    skip: bool,
}

fn collect_fields(fields: &Fields, by_ref: bool, prefix: &str) -> Result<Vec<Field>> {
    let mut out = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        let skip = is_skipped(&f.attrs)?;
        let (access, seg, name) = match &f.ident {
            Some(id) => {
                let access = if by_ref {
                    quote!(#id)
                } else {
                    quote!(&self.#id)
                };
                let lit = id.to_string();
                let lit = lit.strip_prefix("r#").unwrap_or(&lit).to_string();
                (
                    access,
                    quote!(::coreobject::PathSeg::Field(#lit)),
                    format!("{prefix}{lit}"),
                )
            }
            None => {
                let access = if by_ref {
                    let b = format_ident!("__f{}", i);
                    quote!(#b)
                } else {
                    let idx = syn::Index::from(i);
                    quote!(&self.#idx)
                };
                (
                    access,
                    quote!(::coreobject::PathSeg::Position(#i)),
                    format!("{prefix}{i}"),
                )
            }
        };
        out.push(Field {
            access,
            seg,
            name,
            ty: f.ty.clone(),
            skip,
        });
    }
    Ok(out)
}

/// `true || <A as Trace>::NEEDS_TRACE || …` over the traced fields, with each
/// term spanned at its field's type so a missing `Trace` points there.
fn needs_trace<'a>(fields: impl Iterator<Item = &'a Field>) -> TokenStream2 {
    let terms = fields.filter(|f| !f.skip).map(|f| {
        let ty = &f.ty;
        quote_spanned!(ty.span()=> <#ty as ::coreobject::Trace>::NEEDS_TRACE)
    });
    quote!(false #(|| #terms)*)
}

/// `false | <A as Trace>::INTERIOR_MUT | …` over the traced fields. Not
/// `||`: every term is evaluated, so a field type whose constant refuses to
/// compile (a traced `Arc` around a lock) is always reported.
fn interior_mut<'a>(fields: impl Iterator<Item = &'a Field>) -> TokenStream2 {
    let terms = fields.filter(|f| !f.skip).map(|f| {
        let ty = &f.ty;
        quote_spanned!(ty.span()=> <#ty as ::coreobject::Trace>::INTERIOR_MUT)
    });
    quote!(false #(| #terms)*)
}

/// The statements that trace a list of fields.
fn trace_fields(fields: &[Field]) -> TokenStream2 {
    let stmts = fields.iter().filter(|f| !f.skip).map(|f| {
        let (ty, access, seg) = (&f.ty, &f.access, &f.seg);
        quote_spanned! {ty.span()=>
            if <#ty as ::coreobject::Trace>::NEEDS_TRACE {
                __v.enter(#seg);
                <#ty as ::coreobject::Trace>::trace(#access, __v);
                __v.leave();
            }
        }
    });
    quote!(#(#stmts)*)
}

/// The terms of `trace_units`: each traced field's count of pieces.
fn units_fields(fields: &[Field]) -> TokenStream2 {
    let terms = fields.iter().filter(|f| !f.skip).map(|f| {
        let (ty, access) = (&f.ty, &f.access);
        quote_spanned! {ty.span()=>
            + if <#ty as ::coreobject::Trace>::NEEDS_TRACE {
                <#ty as ::coreobject::Trace>::trace_units(#access)
            } else {
                0
            }
        }
    });
    quote!(0usize #(#terms)*)
}

/// The statements of `trace_range`: a flat cursor across the traced
/// fields (`__off` is where the current field's pieces begin), each field
/// given the part of `__start..__end` that falls in its pieces.
fn range_fields(fields: &[Field]) -> TokenStream2 {
    let stmts = fields.iter().filter(|f| !f.skip).map(|f| {
        let (ty, access, seg) = (&f.ty, &f.access, &f.seg);
        quote_spanned! {ty.span()=>
            if <#ty as ::coreobject::Trace>::NEEDS_TRACE && __off < __end {
                let __n = <#ty as ::coreobject::Trace>::trace_units(#access);
                if __start < __off + __n {
                    __v.enter(#seg);
                    <#ty as ::coreobject::Trace>::trace_range(
                        #access,
                        __v,
                        __start.saturating_sub(__off),
                        (__end - __off).min(__n),
                    );
                    __v.leave();
                }
                __off += __n;
            }
        }
    });
    quote!(#(#stmts)*)
}

/// The body of `prefetch` for a struct: forward to every traced field.
fn prefetch_fields(fields: &[Field]) -> TokenStream2 {
    let stmts = fields.iter().filter(|f| !f.skip).map(|f| {
        let (ty, access) = (&f.ty, &f.access);
        quote_spanned! {ty.span()=>
            if <#ty as ::coreobject::Trace>::NEEDS_TRACE {
                <#ty as ::coreobject::Trace>::prefetch(#access);
            }
        }
    });
    quote!(#(#stmts)*)
}

/// A type as written, with the token spacing tidied (`Vec<Obj<Level>>`).
fn type_name(ty: &Type) -> String {
    let raw = ty.to_token_stream().to_string();
    let mut out = String::with_capacity(raw.len());
    let chars: Vec<char> = raw.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c == ' ' {
            let prev = out.chars().last().unwrap_or(' ');
            let next = chars.get(i + 1).copied().unwrap_or(' ');
            let tight = |c: char| "<>:&()[]".contains(c);
            if tight(prev) && prev != ')' && prev != ']' && prev != '>'
                || tight(next) && next != '['
            {
                continue;
            }
            if (prev == ')' || prev == ']' || prev == '>') && !next.is_alphanumeric() && next != '-'
            {
                continue;
            }
        }
        out.push(c);
    }
    out
}

fn field_infos(fields: &[Field]) -> TokenStream2 {
    let infos = fields.iter().map(|f| {
        let name = &f.name;
        let ty = &f.ty;
        let ty_name = type_name(ty);
        let kind = if f.skip {
            quote!(::coreobject::RefKind::Skipped)
        } else {
            quote_spanned!(ty.span()=> <#ty as ::coreobject::Trace>::KIND)
        };
        quote! {
            ::coreobject::FieldInfo { name: #name, type_name: #ty_name, kind: #kind }
        }
    });
    quote!(#(#infos),*)
}

fn expand(input: DeriveInput, is_object: bool) -> Result<TokenStream2> {
    let opts = type_opts(&input.attrs, is_object)?;
    let ident = &input.ident;

    if is_object {
        if let Some(p) = input.generics.params.first() {
            return Err(Error::new(
                p.span(),
                "`#[derive(Object)]` does not support generic types: a class is one \
                 registered type. Derive `Object` on a concrete wrapper, or use \
                 `#[derive(Trace)]` for a generic struct held inside objects",
            ));
        }
    }

    // Fields, and the body of `trace`.
    // Enums keep the default (no-op) `prefetch`: which fields exist depends
    // on the variant, and the match would cost what the hint saves.
    let mut prefetch = quote!();
    // `trace_units` and `trace_range`: a flat cursor across the fields.
    let mut units_body = quote!();
    let mut range_body = quote!();
    let (fields, body) =
        match &input.data {
            Data::Struct(s) => {
                let fields = collect_fields(&s.fields, false, "")?;
                let body = trace_fields(&fields);
                let units = units_fields(&fields);
                let range = range_fields(&fields);
                units_body = quote!(#units);
                range_body = quote! {
                    let mut __off = 0usize;
                    #range
                    let _ = __off;
                };
                let inner = prefetch_fields(&fields);
                prefetch = quote! {
                    #[inline(always)]
                    fn prefetch(&self) {
                        #inner
                    }
                };
                (fields, body)
            }
            Data::Enum(e) => {
                let mut all = Vec::new();
                let mut arms = Vec::new();
                let mut unit_arms = Vec::new();
                let mut range_arms = Vec::new();
                for v in &e.variants {
                    let vid = &v.ident;
                    let vname = vid.to_string();
                    let fields = collect_fields(&v.fields, true, &format!("{vname}."))?;
                    let binds: Vec<Ident> = v
                        .fields
                        .iter()
                        .enumerate()
                        .map(|(i, f)| f.ident.clone().unwrap_or_else(|| format_ident!("__f{}", i)))
                        .collect();
                    let pat = match &v.fields {
                        Fields::Named(_) => quote!(Self::#vid { #(#binds,)* }),
                        Fields::Unnamed(_) => quote!(Self::#vid ( #(#binds,)* )),
                        Fields::Unit => quote!(Self::#vid),
                    };
                    let inner = trace_fields(&fields);
                    let units = units_fields(&fields);
                    let range = range_fields(&fields);
                    unit_arms.push(quote! {
                        #[allow(unused_variables)]
                        #pat => #units,
                    });
                    range_arms.push(quote! {
                        #[allow(unused_variables)]
                        #pat => {
                            __v.enter(::coreobject::PathSeg::Variant(#vname));
                            let mut __off = 0usize;
                            #range
                            let _ = __off;
                            __v.leave();
                        }
                    });
                    arms.push(quote! {
                        #[allow(unused_variables)]
                        #pat => {
                            __v.enter(::coreobject::PathSeg::Variant(#vname));
                            #inner
                            __v.leave();
                        }
                    });
                    all.extend(fields);
                }
                let body = if arms.is_empty() {
                    units_body = quote!(match *self {});
                    range_body = quote!(match *self {});
                    quote!(match *self {})
                } else {
                    units_body = quote!(match self { #(#unit_arms)* });
                    range_body = quote!(match self { #(#range_arms)* });
                    quote!(match self { #(#arms)* })
                };
                (all, body)
            }
            Data::Union(u) => return Err(Error::new(
                u.union_token.span,
                "unions cannot be traced: the collector could not tell which field holds handles",
            )),
        };

    let mut needs = needs_trace(fields.iter());
    let fields_interior = interior_mut(fields.iter());
    // `trace_with` may read anything, skipped fields included: a lock or an
    // atomic of handle bits changes with no `get_mut`, so such a class is
    // interior-mutable unless it says otherwise. The fields' constants are
    // still evaluated (for their compile-time checks).
    let interior = match (opts.interior_mut, &opts.trace_with) {
        (Some(v), _) => quote!({ let _fields: bool = #fields_interior; #v }),
        (None, Some(_)) => quote!({ let _fields: bool = #fields_interior; true }),
        (None, None) => fields_interior,
    };
    let mut body = body;
    // The pieces: a class with `trace_with` is traced whole (the function
    // may read any field, and is not split), the default of one piece.
    let mut pieces = quote! {
        #[inline]
        #[allow(unused_variables)]
        fn trace_units(&self) -> usize {
            #units_body
        }
        #[inline]
        #[allow(unused_variables, unused_mut)]
        fn trace_range<__V: ::coreobject::Visitor + ?::core::marker::Sized>(
            &self,
            __v: &mut __V,
            __start: usize,
            __end: usize,
        ) {
            #range_body
        }
    };
    if let Some(f) = &opts.trace_with {
        pieces = quote!();
        needs = quote!(true);
        body = quote! {
            #body
            #f(self, __v);
        };
    }

    // Generic `Trace` derives require their parameters to be traceable.
    let mut generics = input.generics.clone();
    let params: Vec<Ident> = generics
        .params
        .iter()
        .filter_map(|p| match p {
            GenericParam::Type(t) => Some(t.ident.clone()),
            _ => None,
        })
        .collect();
    if !params.is_empty() {
        let wc = generics.make_where_clause();
        for p in &params {
            wc.predicates
                .push(syn::parse_quote!(#p: ::coreobject::Trace));
        }
    }
    let (impl_g, ty_g, where_c) = generics.split_for_impl();

    let trace_impl = quote! {
        impl #impl_g ::coreobject::Trace for #ident #ty_g #where_c {
            const NEEDS_TRACE: bool = #needs;
            const INTERIOR_MUT: bool = #interior;
            #[inline]
            #[allow(unused_variables)]
            fn trace<__V: ::coreobject::Visitor + ?::core::marker::Sized>(&self, __v: &mut __V) {
                #body
            }
            #prefetch
            #pieces
        }
    };
    if !is_object {
        return Ok(trace_impl);
    }

    let class_name = opts
        .name
        .clone()
        .unwrap_or_else(|| LitStr::new(&ident.to_string(), Span::call_site()));
    let infos = field_infos(&fields);
    let (save_impl, save_static, save_desc) = save::expand(&input)?;
    let cluster = if opts.no_cluster {
        quote!(
            const CAN_BE_IN_CLUSTER: bool = false;
        )
    } else {
        quote!()
    };
    let lifecycle = if opts.lifecycle {
        quote!()
    } else {
        quote! {
            impl ::coreobject::Lifecycle for #ident {
                const HAS_HOOKS: bool = false;
            }
        }
    };

    Ok(quote! {
        #trace_impl
        #lifecycle
        #save_impl
        // SAFETY: `class` returns the one `static` built by
        // `Class::new::<#ident>`, the contract of `Object`.
        unsafe impl ::coreobject::Object for #ident {
            #cluster
            fn class() -> &'static ::coreobject::Class {
                fn __make_default() -> ::core::option::Option<::coreobject::__private::MakeDefault> {
                    #[allow(unused_imports)]
                    use ::coreobject::__private::{NoDefault as _, ViaDefault as _};
                    (&::coreobject::__private::Probe::<#ident>(::core::marker::PhantomData)).make_default()
                }
                static __FIELDS: &[::coreobject::FieldInfo] = &[#infos];
                #save_static
                static __CLASS: ::coreobject::Class = ::coreobject::Class::new::<#ident>(
                    ::coreobject::ClassDesc {
                        name: #class_name,
                        path: ::core::concat!(::core::module_path!(), "::", ::core::stringify!(#ident)),
                        fields: __FIELDS,
                        make_default: __make_default,
                        save: #save_desc,
                    },
                );
                &__CLASS
            }
        }
    })
}
