//! Every ORT API member is called from an `#[ort_ffi]` wrapper, so the probe counts it.
//! The scan recognises member calls the way `rivet-macros` does: a call through a
//! parenthesized field whose name is an ORT C API name (upper-case first letter), or a
//! field of the `ep` table.

use std::path::{Path, PathBuf};

use syn::visit::Visit;

struct Scan {
    /// (file, fn, member) of calls outside an `#[ort_ffi]` function.
    outside: Vec<String>,
    /// Members called inside `#[ort_ffi]` functions.
    inside: Vec<String>,
    file: String,
    stack: Vec<(String, bool)>,
}

fn member(call: &syn::ExprCall) -> Option<String> {
    let syn::Expr::Paren(p) = &*call.func else { return None };
    let syn::Expr::Field(f) = &*p.expr else { return None };
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
        }
        syn::visit::visit_expr_call(self, call);
    }
}

fn scan_source(file: &str, src: &str) -> Scan {
    let ast = syn::parse_file(src).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut s = Scan { outside: vec![], inside: vec![], file: file.into(), stack: vec![] };
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

fn scan_ep() -> (Vec<String>, Vec<String>) {
    let mut files = Vec::new();
    rust_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
    let (mut outside, mut inside) = (Vec::new(), Vec::new());
    for f in files {
        let s = scan_source(&f.display().to_string(), &std::fs::read_to_string(&f).unwrap());
        outside.extend(s.outside);
        inside.extend(s.inside);
    }
    (outside, inside)
}

#[test]
fn every_ort_api_call_in_ep_goes_through_an_ort_ffi_wrapper() {
    let (outside, _) = scan_ep();
    assert!(outside.is_empty(), "ORT API calls outside #[ort_ffi] wrappers:\n{}", outside.join("\n"));
}

#[test]
fn the_scan_finds_real_members() {
    let (_, inside) = scan_ep();
    for m in ["KernelContext_GetInput", "GetTensorElementTypeAndShapeDataReference", "CreateStatus", "create_ep_device"]
    {
        assert!(inside.iter().any(|i| i == m), "the scan should see {m}; saw {inside:?}");
    }
    assert!(inside.len() >= 40, "only {} member calls found", inside.len());
    // And it flags a call outside a wrapper, naming the member.
    let bad = scan_source("x.rs", "impl A { fn f(&self) { unsafe { (self.ort.GetTensorData)(v, &mut p) }; } }");
    assert_eq!(bad.outside, ["x.rs: fn f calls GetTensorData"]);
}
