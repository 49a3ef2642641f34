use proc_macro::TokenStream;
#[proc_macro_attribute]
pub fn ort_ffi(_a: TokenStream, i: TokenStream) -> TokenStream { i }
