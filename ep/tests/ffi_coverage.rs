//! Every ORT API member is called from an `#[ort_ffi]` wrapper, so the probe counts it.
//! The scan recognises member calls the way `rivet-macros` does: a call through a
//! parenthesized field whose name is an ORT C API name (upper-case first letter), or a
//! field of the `ep` table. It also flags, anywhere in `ep/src`, what neither the scan
//! nor the probe could follow: a member used as a value (a copied function pointer is
//! called uncounted) and a member named inside a macro's tokens (`assert!(..)`).

use std::path::{Path, PathBuf};

use syn::visit::Visit;

struct Scan {
    /// (file, fn, member) of calls outside an `#[ort_ffi]` function.
    outside: Vec<String>,
    /// Members called inside `#[ort_ffi]` functions.
    inside: Vec<String>,
    /// Members used other than as the callee of a call, and members inside macros.
    hidden: Vec<String>,
    file: String,
    stack: Vec<(String, bool)>,
}

fn member(call: &syn::ExprCall) -> Option<String> {
    let syn::Expr::Paren(p) = &*call.func else { return None };
    let syn::Expr::Field(f) = &*p.expr else { return None };
    field_member(f)
}

fn field_member(f: &syn::ExprField) -> Option<String> {
    let syn::Member::Named(m) = &f.member else { return None };
    let table = match &*f.base {
        syn::Expr::Field(t) => match &t.member {
            syn::Member::Named(n) => n.to_string(),
            syn::Member::Unnamed(_) => String::new(),
        },
        syn::Expr::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default(),
        _ => String::new(),
    };
    let name = m.to_string();
    (name.starts_with(|c: char| c.is_ascii_uppercase()) || table == "ep").then_some(name)
}

fn is_ort_ffi(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| a.path().segments.last().is_some_and(|s| s.ident == "ort_ffi"))
}

impl<'a> Visit<'a> for Scan {
    fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
        self.stack.push((f.sig.ident.to_string(), is_ort_ffi(&f.attrs)));
        syn::visit::visit_item_fn(self, f);
        self.stack.pop();
    }
    fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
        self.stack.push((f.sig.ident.to_string(), is_ort_ffi(&f.attrs)));
        syn::visit::visit_impl_item_fn(self, f);
        self.stack.pop();
    }
    fn visit_expr_call(&mut self, call: &'a syn::ExprCall) {
        if let Some(m) = member(call) {
            match self.stack.last() {
                Some((_, true)) => self.inside.push(m),
                Some((name, false)) => self.outside.push(format!("{}: fn {name} calls {m}", self.file)),
                None => self.outside.push(format!("{}: {m} called outside any fn", self.file)),
            }
            // The callee is the member itself; what is left are the arguments.
            call.args.iter().for_each(|a| self.visit_expr(a));
            return;
        }
        syn::visit::visit_expr_call(self, call);
    }
    fn visit_expr_field(&mut self, f: &'a syn::ExprField) {
        // As a value, an `ep` table member is only recognised as `x.ep.member`: a local
        // named `ep` (an `OrtEp`) has fields of its own.
        let table_field = matches!(&*f.base, syn::Expr::Field(_));
        let upper =
            matches!(&f.member, syn::Member::Named(m) if m.to_string().starts_with(|c: char| c.is_ascii_uppercase()));
        if let Some(m) = field_member(f).filter(|_| table_field || upper) {
            self.hidden.push(format!("{}: {} uses {m} as a value", self.file, self.here()));
        }
        syn::visit::visit_expr_field(self, f);
    }
    fn visit_macro(&mut self, mac: &'a syn::Macro) {
        // A `macro_rules!` definition is a template over `$` fragments, not calls.
        if mac.path.is_ident("macro_rules") {
            return;
        }
        let name = mac.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
        for m in members_in_tokens(mac.tokens.clone()) {
            self.hidden.push(format!("{}: {} names {m} inside {name}!", self.file, self.here()));
        }
    }
}

impl Scan {
    fn here(&self) -> String {
        self.stack.last().map_or("(no fn)".into(), |(n, _)| format!("fn {n}"))
    }
}

/// `.Member` (upper-case) or `ep.member` in raw tokens, at any depth.
fn members_in_tokens(tokens: proc_macro2::TokenStream) -> Vec<String> {
    use proc_macro2::TokenTree;
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut out = Vec::new();
    for (i, t) in trees.iter().enumerate() {
        match t {
            TokenTree::Group(g) => out.extend(members_in_tokens(g.stream())),
            TokenTree::Punct(p) if p.as_char() == '.' => {
                if let Some(TokenTree::Ident(m)) = trees.get(i + 1) {
                    let after_ep = i > 1
                        && matches!(&trees[i - 1], TokenTree::Ident(e) if e == "ep")
                        && matches!(&trees[i - 2], TokenTree::Punct(d) if d.as_char() == '.');
                    if after_ep || m.to_string().starts_with(|c: char| c.is_ascii_uppercase()) {
                        out.push(m.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    out
}

fn scan_source(file: &str, src: &str) -> Scan {
    let ast = syn::parse_file(src).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut s = Scan { outside: vec![], inside: vec![], hidden: vec![], file: file.into(), stack: vec![] };
    s.visit_file(&ast);
    s
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src").flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn scan_ep() -> (Vec<String>, Vec<String>, Vec<String>) {
    let mut files = Vec::new();
    rust_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
    let (mut outside, mut inside, mut hidden) = (Vec::new(), Vec::new(), Vec::new());
    for f in files {
        let s = scan_source(&f.display().to_string(), &std::fs::read_to_string(&f).unwrap());
        outside.extend(s.outside);
        inside.extend(s.inside);
        hidden.extend(s.hidden);
    }
    (outside, inside, hidden)
}

#[test]
fn every_ort_api_call_in_ep_goes_through_an_ort_ffi_wrapper() {
    let (outside, _, _) = scan_ep();
    assert!(outside.is_empty(), "ORT API calls outside #[ort_ffi] wrappers:\n{}", outside.join("\n"));
}

#[test]
fn no_ort_api_member_is_copied_or_hidden_in_a_macro() {
    let (_, _, hidden) = scan_ep();
    assert!(hidden.is_empty(), "ORT API members the probe cannot count:\n{}", hidden.join("\n"));
}

#[test]
fn the_scan_sees_through_pointers_and_macros() {
    let src = "impl A {
        #[ort_ffi]
        fn f(&self) { let g = self.ort.GetTensorData; unsafe { (self.ort.GetTensorData)(v, &mut p) }; g(); }
        fn h(&self) { debug_assert!(unsafe { (self.ort.ReleaseValue)(v) } == ()); }
        fn k(&self, ep: &Ep) { let n = format!(\"{} {}\", x(self.ep.node_name), ep.api); }
    }";
    let s = scan_source("x.rs", src);
    assert_eq!(
        s.hidden,
        [
            "x.rs: fn f uses GetTensorData as a value",
            "x.rs: fn h names ReleaseValue inside debug_assert!",
            "x.rs: fn k names node_name inside format!"
        ]
    );
}

#[test]
fn the_scan_finds_real_members() {
    let (_, inside, _) = scan_ep();
    for m in ["KernelContext_GetInput", "GetTensorElementTypeAndShapeDataReference", "CreateStatus", "create_ep_device"]
    {
        assert!(inside.iter().any(|i| i == m), "the scan should see {m}; saw {inside:?}");
    }
    assert!(inside.len() >= 40, "only {} member calls found", inside.len());
    // And it flags a call outside a wrapper, naming the member.
    let bad = scan_source("x.rs", "impl A { fn f(&self) { unsafe { (self.ort.GetTensorData)(v, &mut p) }; } }");
    assert_eq!(bad.outside, ["x.rs: fn f calls GetTensorData"]);
}
