//! Argument parsing and validation, shared by the probe and non-probe expansions.

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::parse::{Parse, ParseStream};
use syn::visit::Visit;
use syn::{Block, Expr, ExprCall, Ident, LitStr, Path, Token};

/// The dispatch phases, in dispatch order; the probe runtime's `Phase` has the same
/// variants (a test in `rivet-probe` checks the two lists agree).
pub const PHASES: [&str; 7] =
    ["CallbackEntry", "MetadataQuery", "TensorBind", "Allocate", "DispatchLookup", "KernelInvoke", "StatusCrossing"];

/// Where the expansion finds the runtime: `::rivet_probe` unless `crate = "path"` says.
pub fn default_crate() -> Path {
    syn::parse_quote!(::rivet_probe)
}

/// `crate = "path"`, after the `crate` keyword has been seen.
fn parse_crate_path(input: ParseStream) -> syn::Result<Path> {
    input.parse::<Token![crate]>()?;
    input.parse::<Token![=]>()?;
    let lit: LitStr = input.parse()?;
    lit.parse::<Path>().map_err(|_| syn::Error::new(lit.span(), "expected a path, e.g. `crate = \"my_crate::probe\"`"))
}

/// A phase: one of Rivet's seven by name, or a path to a `static UserPhase`.
pub enum PhaseRef {
    Rivet(Ident),
    User(Path),
}

/// A validated phase, then an optional `crate = "path"`.
pub struct PhaseArg {
    pub phase: PhaseRef,
    pub krate: Path,
}

fn parse_phase(input: ParseStream) -> syn::Result<PhaseRef> {
    if input.is_empty() {
        return Err(syn::Error::new(
            Span::call_site(),
            format!("expected a phase name, one of: {}", PHASES.join(", ")),
        ));
    }
    let path: Path = input.parse()?;
    if path.leading_colon.is_some() || path.segments.len() > 1 {
        return Ok(PhaseRef::User(path));
    }
    let name = path.get_ident().cloned().ok_or_else(|| syn::Error::new_spanned(&path, "expected a phase name"))?;
    if !PHASES.contains(&name.to_string().as_str()) {
        return Err(syn::Error::new(
            name.span(),
            format!(
                "unknown dispatch phase `{name}`; expected one of: {}, or a path to a `static UserPhase` (`self::{name}`)",
                PHASES.join(", ")
            ),
        ));
    }
    Ok(PhaseRef::Rivet(name))
}

impl Parse for PhaseArg {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let phase = parse_phase(input)?;
        let mut krate = None;
        if !input.is_empty() {
            if input.peek(Token![,]) && input.peek2(Token![crate]) {
                input.parse::<Token![,]>()?;
                krate = Some(parse_crate_path(input)?);
            }
            if !input.is_empty() {
                let extra: TokenStream = input.parse()?;
                return Err(syn::Error::new_spanned(extra, "expected only one phase name"));
            }
        }
        Ok(PhaseArg { phase, krate: krate.unwrap_or_else(default_crate) })
    }
}

/// `#[ort_ffi]` or `#[ort_ffi(crate = "path")]`.
pub struct FfiArgs {
    pub krate: Path,
}

impl Parse for FfiArgs {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if input.is_empty() {
            return Ok(FfiArgs { krate: default_crate() });
        }
        if !input.peek(Token![crate]) {
            let extra: TokenStream = input.parse()?;
            return Err(syn::Error::new_spanned(extra, "#[ort_ffi] takes no arguments but `crate = \"path\"`"));
        }
        let krate = parse_crate_path(input)?;
        if !input.is_empty() {
            let extra: TokenStream = input.parse()?;
            return Err(syn::Error::new_spanned(extra, "#[ort_ffi] takes no arguments but `crate = \"path\"`"));
        }
        Ok(FfiArgs { krate })
    }
}

/// `Phase, { block }` or `Phase, crate = "path", { block }` for the function-like form.
pub struct PhaseBlock {
    pub phase: PhaseArg,
    pub block: Block,
}

impl Parse for PhaseBlock {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let phase = parse_phase(input)?;
        input.parse::<Token![,]>()?;
        let mut krate = default_crate();
        if input.peek(Token![crate]) {
            krate = parse_crate_path(input)?;
            input.parse::<Token![,]>()?;
        }
        let block: Block = input.parse()?;
        if !input.is_empty() {
            let extra: TokenStream = input.parse()?;
            return Err(syn::Error::new_spanned(extra, "expected `Phase, { ... }`"));
        }
        Ok(PhaseBlock { phase: PhaseArg { phase, krate }, block })
    }
}

/// `staging_log!([crate = "path",] "format", args..)`.
pub struct LogArgs {
    pub krate: Path,
    pub format: TokenStream,
}

impl Parse for LogArgs {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut krate = default_crate();
        if input.peek(Token![crate]) {
            krate = parse_crate_path(input)?;
            input.parse::<Token![,]>()?;
        }
        let format: TokenStream = input.parse()?;
        let args = syn::punctuated::Punctuated::<Expr, Token![,]>::parse_separated_nonempty.parse2(format.clone())?;
        let first = args.first().expect("nonempty");
        if !matches!(first, Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(_), .. })) {
            return Err(syn::Error::new_spanned(first, "staging_log! needs a format string literal first"));
        }
        Ok(LogArgs { krate, format })
    }
}

use syn::parse::Parser;

/// One call of an ORT API member, recognised by shape: a call through a parenthesized
/// field whose name is an ORT C API name (`(self.ort.KernelContext_GetInput)(..)`,
/// `((*base).GetApi)(..)`: they start with an upper-case letter), or through a field of
/// the `ep` table (`(self.ep.create_ep_device)(..)`, an `OrtEpApi` member).
pub struct MemberCall {
    pub table: String,
    pub member: Ident,
}

/// If `field` names an ORT API member, its table and name.
pub fn member_field(field: &syn::ExprField) -> Option<MemberCall> {
    let syn::Member::Named(member) = &field.member else { return None };
    let table = match &*field.base {
        Expr::Field(t) => match &t.member {
            syn::Member::Named(n) => n.to_string(),
            syn::Member::Unnamed(_) => String::new(),
        },
        Expr::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default(),
        _ => String::new(),
    };
    (is_upper(member) || table == "ep").then(|| MemberCall { table, member: member.clone() })
}

fn is_upper(name: &Ident) -> bool {
    name.to_string().starts_with(|c: char| c.is_ascii_uppercase())
}

/// If `call` is an ORT API member call, which one.
pub fn member_call(call: &ExprCall) -> Option<MemberCall> {
    let Expr::Paren(paren) = &*call.func else { return None };
    let Expr::Field(field) = &*paren.expr else { return None };
    member_field(field)
}

/// What a wrapper's body holds: its member calls, members used as values (a local
/// function pointer would make uncounted calls), and member mentions inside macros
/// (whose tokens the probe can neither see nor rewrite).
#[derive(Default)]
pub struct Findings {
    pub calls: Vec<MemberCall>,
    pub as_values: Vec<MemberCall>,
    pub in_macros: Vec<(String, Ident)>,
}

pub fn scan_block(block: &Block) -> Findings {
    struct Finder(Findings);
    impl<'a> Visit<'a> for Finder {
        fn visit_expr_call(&mut self, call: &'a ExprCall) {
            if let Some(m) = member_call(call) {
                self.0.calls.push(m);
                // The callee is the member itself: only the arguments are left to look at.
                for a in &call.args {
                    self.visit_expr(a);
                }
                return;
            }
            syn::visit::visit_expr_call(self, call);
        }
        fn visit_expr_field(&mut self, field: &'a syn::ExprField) {
            // As a value, an `ep` member is only recognised as `x.ep.member`: a local
            // named `ep` may be any struct.
            let table_field = matches!(&*field.base, Expr::Field(_));
            if let Some(m) = member_field(field).filter(|m| table_field || m.table != "ep" || is_upper(&m.member)) {
                self.0.as_values.push(m);
            }
            syn::visit::visit_expr_field(self, field);
        }
        fn visit_macro(&mut self, mac: &'a syn::Macro) {
            let name = mac.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
            for member in members_in_tokens(mac.tokens.clone()) {
                self.0.in_macros.push((name.clone(), member));
            }
        }
        // Nested items are their own functions.
        fn visit_item(&mut self, _: &'a syn::Item) {}
    }
    let mut f = Finder(Findings::default());
    f.visit_block(block);
    f.0
}

/// ORT API members mentioned in raw tokens: `. Member` with an upper-case first letter,
/// or `ep . member`, at any depth.
pub fn members_in_tokens(tokens: TokenStream) -> Vec<Ident> {
    let mut out = Vec::new();
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, t) in trees.iter().enumerate() {
        match t {
            TokenTree::Group(g) => out.extend(members_in_tokens(g.stream())),
            TokenTree::Punct(p) if p.as_char() == '.' => {
                let Some(TokenTree::Ident(m)) = trees.get(i + 1) else { continue };
                let upper = m.to_string().starts_with(|c: char| c.is_ascii_uppercase());
                let after_ep = i > 1
                    && matches!(&trees[i - 1], TokenTree::Ident(t) if t == "ep")
                    && matches!(&trees[i - 2], TokenTree::Punct(d) if d.as_char() == '.');
                if upper || after_ep {
                    out.push(m.clone());
                }
            }
            _ => {}
        }
    }
    out
}
