//! Argument parsing and validation, shared by the probe and non-probe expansions.

use proc_macro2::{Span, TokenStream};
use syn::parse::{Parse, ParseStream};
use syn::visit::Visit;
use syn::{Block, Expr, ExprCall, Ident, Token};

/// The dispatch phases, in dispatch order; the probe runtime's `Phase` has the same
/// variants (a test in `rivet-ep` checks the two lists agree).
pub const PHASES: [&str; 7] =
    ["CallbackEntry", "MetadataQuery", "TensorBind", "Allocate", "DispatchLookup", "KernelInvoke", "StatusCrossing"];

/// A validated phase name.
pub struct PhaseArg(pub Ident);

impl Parse for PhaseArg {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if input.is_empty() {
            return Err(syn::Error::new(
                Span::call_site(),
                format!("expected a phase name, one of: {}", PHASES.join(", ")),
            ));
        }
        let name: Ident = input.parse()?;
        if !PHASES.contains(&name.to_string().as_str()) {
            return Err(syn::Error::new(
                name.span(),
                format!("unknown dispatch phase `{name}`; expected one of: {}", PHASES.join(", ")),
            ));
        }
        if !input.is_empty() {
            let extra: TokenStream = input.parse()?;
            return Err(syn::Error::new_spanned(extra, "expected only one phase name"));
        }
        Ok(PhaseArg(name))
    }
}

/// `Phase, { block }` for the function-like form.
pub struct PhaseBlock {
    pub phase: PhaseArg,
    pub block: Block,
}

impl Parse for PhaseBlock {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let name: Ident = input.parse()?;
        let phase: PhaseArg = syn::parse2(quote::quote!(#name))?;
        input.parse::<Token![,]>()?;
        let block: Block = input.parse()?;
        if !input.is_empty() {
            let extra: TokenStream = input.parse()?;
            return Err(syn::Error::new_spanned(extra, "expected `Phase, { ... }`"));
        }
        Ok(PhaseBlock { phase, block })
    }
}

/// One call of an ORT API member, recognised by shape: a call through a parenthesized
/// field whose name is an ORT C API name (`(self.ort.KernelContext_GetInput)(..)`,
/// `((*base).GetApi)(..)`: they start with an upper-case letter), or through a field of
/// the `ep` table (`(self.ep.create_ep_device)(..)`, an `OrtEpApi` member).
pub struct MemberCall {
    pub table: String,
    pub member: Ident,
}

/// If `call` is an ORT API member call, which one.
pub fn member_call(call: &ExprCall) -> Option<MemberCall> {
    let Expr::Paren(paren) = &*call.func else { return None };
    let Expr::Field(field) = &*paren.expr else { return None };
    let syn::Member::Named(member) = &field.member else { return None };
    let table = match &*field.base {
        Expr::Field(t) => match &t.member {
            syn::Member::Named(n) => n.to_string(),
            syn::Member::Unnamed(_) => String::new(),
        },
        Expr::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default(),
        _ => String::new(),
    };
    let ort_name = member.to_string().starts_with(|c: char| c.is_ascii_uppercase());
    (ort_name || table == "ep").then(|| MemberCall { table, member: member.clone() })
}

/// Every ORT API member call in a block.
pub fn member_calls(block: &Block) -> Vec<MemberCall> {
    struct Finder(Vec<MemberCall>);
    impl<'a> Visit<'a> for Finder {
        fn visit_expr_call(&mut self, call: &'a ExprCall) {
            if let Some(m) = member_call(call) {
                self.0.push(m);
            }
            syn::visit::visit_expr_call(self, call);
        }
        // Nested items are their own functions.
        fn visit_item(&mut self, _: &'a syn::Item) {}
    }
    let mut f = Finder(Vec::new());
    f.visit_block(block);
    f.0
}
