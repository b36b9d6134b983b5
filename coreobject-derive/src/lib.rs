// TEMPORARY STUB (main author) so the core compiles; helper-1 replaces this file entirely.
use proc_macro::TokenStream;
#[proc_macro_derive(Object, attributes(object))]
pub fn derive_object(_i: TokenStream) -> TokenStream { TokenStream::new() }
#[proc_macro_derive(Trace, attributes(object))]
pub fn derive_trace(_i: TokenStream) -> TokenStream { TokenStream::new() }
