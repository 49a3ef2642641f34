//! Expansions. Each takes `probe`, the build's feature choice, so both expansions are
//! unit-tested in one build.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{parse2, ItemFn, LitStr};

use crate::parse::{member_calls, PhaseArg, PhaseBlock};

/// On error: the error plus the original item, so one mistake gives one message and the
/// editor keeps working on the rest.
fn with_item(err: syn::Error, item: TokenStream) -> TokenStream {
    let mut out = err.into_compile_error();
    out.extend(item);
    out
}

fn parse_fn(item: &TokenStream, macro_name: &str) -> syn::Result<ItemFn> {
    parse2::<ItemFn>(item.clone())
        .map_err(|e| syn::Error::new(e.span(), format!("#[{macro_name}] goes on a function (free fn or method)")))
}

pub fn dispatch_phase_attr(attr: TokenStream, item: TokenStream, probe: bool) -> TokenStream {
    let phase = match parse2::<PhaseArg>(attr) {
        Ok(p) => p,
        Err(e) => return with_item(e, item),
    };
    let mut func = match parse_fn(&item, "dispatch_phase") {
        Ok(f) => f,
        Err(e) => return with_item(e, item),
    };
    if !probe {
        return item;
    }
    let name = phase.0;
    let stmts = &func.block.stmts;
    let span = func.sig.span();
    let new_body = quote_spanned! {span=>
        {
            let __rivet_phase_guard = ::rivet_ep::probe::PhaseGuard::enter(::rivet_ep::probe::Phase::#name);
            #(#stmts)*
        }
    };
    func.block = Box::new(parse2(new_body).expect("a block"));
    func.into_token_stream()
}

pub fn dispatch_phase_block(input: TokenStream, probe: bool) -> TokenStream {
    let PhaseBlock { phase, block } = match parse2::<PhaseBlock>(input) {
        Ok(p) => p,
        Err(e) => return e.into_compile_error(),
    };
    if !probe {
        return block.into_token_stream();
    }
    let name = phase.0;
    let stmts = &block.stmts;
    quote! {
        {
            let __rivet_phase_guard = ::rivet_ep::probe::PhaseGuard::enter(::rivet_ep::probe::Phase::#name);
            #(#stmts)*
        }
    }
}

pub fn ort_ffi(attr: TokenStream, item: TokenStream, probe: bool) -> TokenStream {
    if !attr.is_empty() {
        return with_item(syn::Error::new_spanned(attr, "#[ort_ffi] takes no arguments"), item);
    }
    let mut func = match parse_fn(&item, "ort_ffi") {
        Ok(f) => f,
        Err(e) => return with_item(e, item),
    };
    let calls = member_calls(&func.block);
    let member = match calls.as_slice() {
        [one] => one.member.clone(),
        [] => {
            return with_item(
                syn::Error::new_spanned(
                    &func.sig.ident,
                    "#[ort_ffi] function calls no ORT API member: expected exactly one call of the form `(self.ort.Member)(..)` or `(self.ep.member)(..)`",
                ),
                item,
            )
        }
        many => {
            let names: Vec<String> = many.iter().map(|c| format!("{}.{}", c.table, c.member)).collect();
            let mut err = syn::Error::new_spanned(
                &func.sig.ident,
                format!("#[ort_ffi] function calls {} ORT API members ({}); split it so each wrapper makes exactly one call", many.len(), names.join(", ")),
            );
            for extra in &many[1..] {
                err.combine(syn::Error::new(extra.member.span(), "another ORT API call here"));
            }
            return with_item(err, item);
        }
    };
    if !probe {
        return item;
    }
    let name = LitStr::new(&member.to_string(), member.span());
    let stmts = &func.block.stmts;
    let new_body = quote! {
        {
            static __RIVET_FFI_SITE: ::rivet_ep::probe::FfiSite = ::rivet_ep::probe::FfiSite::new(#name);
            __RIVET_FFI_SITE.hit();
            #(#stmts)*
        }
    };
    func.block = Box::new(parse2(new_body).expect("a block"));
    func.into_token_stream()
}

pub fn staging_log(input: TokenStream, probe: bool) -> TokenStream {
    let args = match syn::parse::Parser::parse2(
        syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_separated_nonempty,
        input.clone(),
    ) {
        Ok(a) => a,
        Err(e) => return e.into_compile_error(),
    };
    let first = args.first().expect("nonempty");
    if !matches!(first, syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(_), .. })) {
        return syn::Error::new_spanned(first, "staging_log! needs a format string literal first").into_compile_error();
    }
    if probe {
        quote! {
            if ::rivet_ep::probe::trace_enabled() {
                ::rivet_ep::probe::trace(::core::format_args!(#input));
            }
        }
    } else {
        // Type-check the arguments inside a closure that is never called: nothing is
        // evaluated, nothing is formatted.
        quote! {
            {
                let _ = || {
                    let _ = ::core::format_args!(#input);
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(t: TokenStream) -> String {
        t.to_string()
    }

    const METHOD: &str = "pub fn kernel_input(&self, ctx: *const C, i: usize) -> Result<*const V> {
        let mut p = ptr::null();
        self.check(unsafe { (self.ort.KernelContext_GetInput)(ctx, i, &mut p) })?;
        Ok(p)
    }";

    #[test]
    fn without_probe_every_macro_returns_the_function_untouched() {
        let item: TokenStream = METHOD.parse().unwrap();
        assert_eq!(norm(ort_ffi(TokenStream::new(), item.clone(), false)), norm(item.clone()));
        assert_eq!(norm(dispatch_phase_attr(quote!(TensorBind), item.clone(), false)), norm(item.clone()));
        let block: TokenStream = "TensorBind, { let a = 1; a + 1 }".parse().unwrap();
        assert_eq!(norm(dispatch_phase_block(block, false)), norm("{ let a = 1; a + 1 }".parse().unwrap()));
    }

    #[test]
    fn with_probe_the_hooks_are_added() {
        let item: TokenStream = METHOD.parse().unwrap();
        let ffi = norm(ort_ffi(TokenStream::new(), item.clone(), true));
        assert!(ffi.contains("FfiSite :: new (\"KernelContext_GetInput\")"), "{ffi}");
        let phase = norm(dispatch_phase_attr(quote!(TensorBind), item, true));
        assert!(phase.contains("PhaseGuard :: enter (:: rivet_ep :: probe :: Phase :: TensorBind)"), "{phase}");
    }

    #[test]
    fn disabled_log_type_checks_its_arguments_but_never_runs_them() {
        let off = norm(staging_log(quote!("x = {}", expensive()), false));
        assert!(off.contains("let _ = ||"), "{off}");
        let on = norm(staging_log(quote!("x = {}", expensive()), true));
        assert!(on.contains("trace_enabled"), "{on}");
    }

    #[test]
    fn misuse_is_an_error_in_both_builds() {
        for probe in [false, true] {
            let item: TokenStream = METHOD.parse().unwrap();
            let bad_phase = norm(dispatch_phase_attr(quote!(Tensorbind), item.clone(), probe));
            assert!(bad_phase.contains("unknown dispatch phase `Tensorbind`"), "{bad_phase}");
            let none: TokenStream = "fn f(&self) -> u32 { 1 }".parse().unwrap();
            assert!(norm(ort_ffi(TokenStream::new(), none, probe)).contains("calls no ORT API member"));
            let two: TokenStream = "fn f(&self) { (self.ort.A)(); (self.ep.b)(); }".parse().unwrap();
            assert!(norm(ort_ffi(TokenStream::new(), two, probe)).contains("calls 2 ORT API members (ort.A, ep.b)"));
        }
    }
}
