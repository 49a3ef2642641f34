//! Expansions. Each takes `probe`, the build's feature choice, so both expansions are
//! unit-tested in one build. Validation runs first, in both builds, so a mistake is an
//! error whichever way the feature is set.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{parse2, Expr, ItemFn, LitStr, Path};

use crate::parse::{member_call, scan_block, FfiArgs, LogArgs, PhaseArg, PhaseBlock, PhaseRef};

/// On error: the error plus the original item, so one mistake gives one message and the
/// editor keeps working on the rest.
fn with_item(err: syn::Error, item: TokenStream) -> TokenStream {
    let mut out = err.into_compile_error();
    out.extend(item);
    out
}

/// The item as a function that can hold a guard: not `const` (a guard cannot run at
/// compile time), not `async` (a guard held across `.await` would charge whatever else
/// runs on the thread meanwhile to this phase).
fn parse_fn(item: &TokenStream, macro_name: &str) -> syn::Result<ItemFn> {
    let func = parse2::<ItemFn>(item.clone())
        .map_err(|e| syn::Error::new(e.span(), format!("#[{macro_name}] goes on a function (free fn or method)")))?;
    if let Some(c) = &func.sig.constness {
        return Err(syn::Error::new(
            c.span,
            format!(
                "#[{macro_name}] cannot go on a `const fn`: the probe's counters are not available at compile time"
            ),
        ));
    }
    if let Some(a) = &func.sig.asyncness {
        return Err(syn::Error::new(
            a.span,
            format!(
                "#[{macro_name}] cannot go on an `async fn`: its phase would stay open across `.await`, charging other tasks' work on this thread to it; put the synchronous part in a plain fn"
            ),
        ));
    }
    Ok(func)
}

/// `let __rivet_phase_guard = <krate>::PhaseGuard::enter(..);`, spanned at the phase so
/// a wrong user phase is reported where it is written.
fn enter_guard(arg: &PhaseArg) -> TokenStream {
    let krate = &arg.krate;
    match &arg.phase {
        PhaseRef::Rivet(name) => quote_spanned! {name.span()=>
            let __rivet_phase_guard = #krate::PhaseGuard::enter(#krate::Phase::#name);
        },
        PhaseRef::User(path) => {
            let check = user_phase_check(krate, path);
            quote_spanned! {path.span()=>
                #check
                let __rivet_phase_guard = #krate::PhaseGuard::enter_user(__rivet_user_phase);
            }
        }
    }
}

/// `let __rivet_user_phase: &'static UserPhase = &path;`: in both builds, so a user phase
/// is type-checked (and its static used) with the feature off too; it evaluates nothing.
fn user_phase_check(krate: &Path, path: &Path) -> TokenStream {
    quote_spanned! {path.span()=>
        let __rivet_user_phase: &'static #krate::UserPhase = &#path;
    }
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
        let PhaseRef::User(path) = &phase.phase else { return item };
        // Rivet's phases leave the item untouched; a user phase keeps its type check.
        let check = user_phase_check(&phase.krate, path);
        let stmts = &func.block.stmts;
        func.block = Box::new(parse2(quote! { { #check #(#stmts)* } }).expect("a block"));
        return func.into_token_stream();
    }
    let guard = enter_guard(&phase);
    let stmts = &func.block.stmts;
    let span = func.sig.span();
    let new_body = quote_spanned! {span=>
        {
            #guard
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
    let guard = enter_guard(&phase);
    let stmts = &block.stmts;
    quote! {
        {
            #guard
            #(#stmts)*
        }
    }
}

/// Puts a counting site in front of every ORT API member call: each call is counted
/// where it is made, however often the wrapper runs it (a loop, a retry) or skips it.
struct CountCalls<'a> {
    krate: &'a Path,
}

impl VisitMut for CountCalls<'_> {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        syn::visit_mut::visit_expr_mut(self, e);
        let Expr::Call(call) = e else { return };
        let Some(m) = member_call(call) else { return };
        let krate = self.krate;
        let name = LitStr::new(&m.member.to_string(), m.member.span());
        let counted = quote_spanned! {call.span()=>
            {
                static __RIVET_FFI_SITE: #krate::FfiSite = #krate::FfiSite::new(#name);
                __RIVET_FFI_SITE.hit();
                #call
            }
        };
        *e = parse2(counted).expect("a block expression");
    }
    // Nested items are their own functions.
    fn visit_item_mut(&mut self, _: &mut syn::Item) {}
}

pub fn ort_ffi(attr: TokenStream, item: TokenStream, probe: bool) -> TokenStream {
    let args = match parse2::<FfiArgs>(attr) {
        Ok(a) => a,
        Err(e) => return with_item(e, item),
    };
    let mut func = match parse_fn(&item, "ort_ffi") {
        Ok(f) => f,
        Err(e) => return with_item(e, item),
    };
    let found = scan_block(&func.block);
    if let Some((mac, member)) = found.in_macros.first() {
        return with_item(
            syn::Error::new(
                member.span(),
                format!("ORT API member `{member}` inside `{mac}!`: the probe can neither see nor count a call in a macro's tokens; make the call outside the macro and pass its result in"),
            ),
            item,
        );
    }
    if let Some(v) = found.as_values.first() {
        return with_item(
            syn::Error::new(
                v.member.span(),
                format!("ORT API member `{}.{}` used as a value: calls through a copy of it go uncounted; call it in place, `(self.{}.{})(..)`", v.table, v.member, v.table, v.member),
            ),
            item,
        );
    }
    match found.calls.as_slice() {
        [_] => {}
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
    }
    if !probe {
        return item;
    }
    CountCalls { krate: &args.krate }.visit_block_mut(&mut func.block);
    func.into_token_stream()
}

pub fn staging_log(input: TokenStream, probe: bool) -> TokenStream {
    let LogArgs { krate, format } = match parse2::<LogArgs>(input) {
        Ok(a) => a,
        Err(e) => return e.into_compile_error(),
    };
    if probe {
        quote! {
            if #krate::trace_enabled() {
                #krate::trace(::core::format_args!(#format));
            }
        }
    } else {
        // Type-check the arguments inside a closure that is never called: nothing is
        // evaluated, nothing is formatted.
        quote! {
            {
                let _ = || {
                    let _ = ::core::format_args!(#format);
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
        assert_eq!(norm(ort_ffi(quote!(crate = "x::y"), item.clone(), false)), norm(item.clone()));
        assert_eq!(norm(dispatch_phase_attr(quote!(TensorBind), item.clone(), false)), norm(item.clone()));
        // A user phase is only type-checked: a reference to its static, nothing run.
        let user = norm(dispatch_phase_attr(quote!(crate::PARSE), item.clone(), false));
        assert!(
            user.contains(
                "{ let __rivet_user_phase : & 'static :: rivet_probe :: UserPhase = & crate :: PARSE ; let mut p"
            ),
            "{user}"
        );
        assert!(!user.contains("PhaseGuard"), "{user}");
        let block: TokenStream = "TensorBind, { let a = 1; a + 1 }".parse().unwrap();
        assert_eq!(norm(dispatch_phase_block(block, false)), norm("{ let a = 1; a + 1 }".parse().unwrap()));
    }

    #[test]
    fn with_probe_the_hooks_are_added_at_each_call() {
        let item: TokenStream = METHOD.parse().unwrap();
        let ffi = norm(ort_ffi(TokenStream::new(), item.clone(), true));
        // The site sits beside the call, inside the `unsafe` block, not at the wrapper's entry.
        assert!(
            ffi.contains("unsafe { { static __RIVET_FFI_SITE : :: rivet_probe :: FfiSite = :: rivet_probe :: FfiSite :: new (\"KernelContext_GetInput\") ; __RIVET_FFI_SITE . hit () ; (self . ort . KernelContext_GetInput) (ctx , i , & mut p) } }"),
            "{ffi}"
        );
        let phase = norm(dispatch_phase_attr(quote!(TensorBind), item.clone(), true));
        assert!(phase.contains("PhaseGuard :: enter (:: rivet_probe :: Phase :: TensorBind)"), "{phase}");
        let user = norm(dispatch_phase_attr(quote!(self::PARSE), item, true));
        assert!(user.contains("PhaseGuard :: enter_user (__rivet_user_phase)"), "{user}");
    }

    #[test]
    fn a_crate_path_replaces_the_default_in_every_expansion() {
        let item: TokenStream = METHOD.parse().unwrap();
        let ffi = norm(ort_ffi(quote!(crate = "my::probe"), item.clone(), true));
        assert!(ffi.contains("my :: probe :: FfiSite :: new") && !ffi.contains("rivet_probe"), "{ffi}");
        let phase = norm(dispatch_phase_attr(quote!(Allocate, crate = "my::probe"), item, true));
        assert!(phase.contains("my :: probe :: PhaseGuard :: enter (my :: probe :: Phase :: Allocate)"), "{phase}");
        let block = norm(dispatch_phase_block(quote!(Allocate, crate = "my::probe", { 1 }), true));
        assert!(block.contains("my :: probe :: PhaseGuard"), "{block}");
        let log = norm(staging_log(quote!(crate = "my::probe", "x {}", 1), true));
        assert!(log.contains("my :: probe :: trace_enabled"), "{log}");
    }

    #[test]
    fn a_call_in_a_loop_is_counted_each_time_round() {
        let item: TokenStream = "fn f(&self) { loop { if unsafe { (self.ort.Get)(1) } { break; } } }".parse().unwrap();
        let out = norm(ort_ffi(TokenStream::new(), item, true));
        assert!(out.contains("loop { if unsafe { { static __RIVET_FFI_SITE"), "{out}");
    }

    #[test]
    fn disabled_log_type_checks_its_arguments_but_never_runs_them() {
        let off = norm(staging_log(quote!("x = {}", expensive()), false));
        assert!(off.contains("let _ = ||"), "{off}");
        assert!(!off.contains("trace"), "{off}");
        let on = norm(staging_log(quote!("x = {}", expensive()), true));
        // Formatting happens inside the check, never before it.
        assert!(
            on.starts_with("if :: rivet_probe :: trace_enabled () { :: rivet_probe :: trace (:: core :: format_args !"),
            "{on}"
        );
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
            let pointer: TokenStream =
                "fn f(&self) { let g = self.ort.A; unsafe { (self.ort.A)(); g() } }".parse().unwrap();
            assert!(norm(ort_ffi(TokenStream::new(), pointer, probe)).contains("`ort.A` used as a value"));
            let in_assert: TokenStream =
                "fn f(&self) { unsafe { (self.ort.A)() }; assert!(unsafe { (self.ort.B)() }.0.is_null()); }"
                    .parse()
                    .unwrap();
            assert!(norm(ort_ffi(TokenStream::new(), in_assert, probe)).contains("member `B` inside `assert!`"));
            let ep_in_macro: TokenStream =
                "fn f(&self) { unsafe { (self.ort.A)() }; debug_assert!(x(self.ep.node_name)); }".parse().unwrap();
            assert!(norm(ort_ffi(TokenStream::new(), ep_in_macro, probe)).contains("member `node_name` inside"));
            let konst: TokenStream = "const fn f() {}".parse().unwrap();
            assert!(norm(dispatch_phase_attr(quote!(Allocate), konst, probe)).contains("cannot go on a `const fn`"));
            let asynk: TokenStream = "async fn f() {}".parse().unwrap();
            assert!(norm(dispatch_phase_attr(quote!(Allocate), asynk, probe)).contains("cannot go on an `async fn`"));
        }
    }
}
