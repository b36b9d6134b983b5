//! `#[derive(Data)]`: the data door's view of a class (the fields that
//! cannot hold strong handles, writable without the write barrier).

use proc_macro2::TokenStream as TokenStream2;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data as Body, DeriveInput, Error, Fields, Result};

/// The view struct and the `Data` impl for `input`.
pub(crate) fn expand(input: DeriveInput) -> Result<TokenStream2> {
    let ident = &input.ident;
    if let Some(p) = input.generics.params.first() {
        return Err(Error::new(
            p.span(),
            "`#[derive(Data)]` does not support generic types (object classes are concrete)",
        ));
    }
    let opts = crate::type_opts(&input.attrs, true)?;
    if let Some(path) = &opts.trace_with {
        return Err(Error::new(
            path.span(),
            "`#[derive(Data)]` cannot be used with `trace_with`: the function may read handles \
             from any field, so no field can be written without the write barrier; use \
             `Heap::get_mut`",
        ));
    }
    let fields = match &input.data {
        Body::Struct(s) => match &s.fields {
            Fields::Named(n) => &n.named,
            _ => {
                return Err(Error::new(
                    ident.span(),
                    "`#[derive(Data)]` needs a struct with named fields",
                ))
            }
        },
        _ => {
            return Err(Error::new(
                ident.span(),
                "`#[derive(Data)]` needs a struct with named fields",
            ))
        }
    };
    let view = format_ident!("{}Data", ident);
    // One lifetime token, interpolated everywhere: a lifetime written inside
    // `quote_spanned!` would take the field type's span and not resolve.
    let lt = syn::Lifetime::new("'__a", proc_macro2::Span::call_site());
    let anon = syn::Lifetime::new("'_", proc_macro2::Span::call_site());
    let mut decls = Vec::new();
    let mut inits = Vec::new();
    for f in fields {
        let name = f.ident.as_ref().expect("named field");
        let (ty, vis) = (&f.ty, &f.vis);
        if crate::is_skipped(&f.attrs)? {
            // Never traced (and no `trace_with` reads it): plain `&mut`.
            decls.push(quote!(#vis #name: &#lt mut #ty));
            inits.push(quote!(#name: &mut self.#name));
        } else {
            // The compiler picks `&mut` or `Sealed` from the type's
            // `NEEDS_TRACE`: a field that can hold handles is never writable.
            let pick = |lt: &syn::Lifetime| {
                quote_spanned!(ty.span()=>
                    <::coreobject::trace::data_door::Pick<{ <#ty as ::coreobject::Trace>::NEEDS_TRACE }>
                        as ::coreobject::trace::data_door::DataField<#lt, #ty>>
                )
            };
            let (decl, init) = (pick(&lt), pick(&anon));
            decls.push(quote!(#vis #name: #decl::Out));
            inits.push(quote!(#name: #init::door(&mut self.#name)));
        }
    }
    let doc = format!(
        "The data door's view of [`{ident}`] (see `coreobject::Data`): `&mut` to each field \
         that cannot hold strong handles, a sealed placeholder for each one that can."
    );
    let vis = &input.vis;
    Ok(quote! {
        #[doc = #doc]
        #[allow(missing_docs)]
        #vis struct #view<#lt> {
            #(#decls,)*
        }
        impl ::coreobject::Data for #ident {
            type View<#lt> = #view<#lt> where Self: #lt;
            #[inline(always)]
            fn data_view(&mut self) -> #view<'_> {
                #view { #(#inits,)* }
            }
        }
    })
}
