//! The functions of a Rust source file, found with `syn` in one walk.
//!
//! Each one's name and the items around it, its spans, and whether it is test code.
//! A function is a `fn` item (free, nested in another function, in an inline module) or a
//! method with a body in an `impl` or a `trait`; a trait method without a body is none.
//! Switch mode ([`crate::battery::execute::instrument`]) reads the body spans and names a
//! function by its `impl` or `trait`; UNGUARDED-IN-DIFF ([`crate::battery::select::unguarded`])
//! reads the item spans, leaves test code out and names a function by its full path.

use std::ops::Range;

use syn::spanned::Spanned;
use syn::visit::Visit;

/// An item a function lies in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// An inline module (`mod name { ... }`).
    Module(String),
    /// An enclosing function.
    Function(String),
    /// An `impl` block.
    Impl {
        /// Its self type.
        self_type: SelfType,
        /// For a trait impl, the last segment of the trait's path (empty when it has none).
        trait_name: Option<String>,
    },
    /// A trait (its methods' default bodies).
    Trait(String),
}

/// An `impl` block's self type, as far as a function's name needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelfType {
    /// A path type, by the name of its last segment (`Vec` for `std::vec::Vec<T>`).
    Named(String),
    /// A reference to a type (`&S`, `&mut S`).
    Reference(Box<SelfType>),
    /// Any other type (a tuple, a slice, a trait object, ...).
    Other,
}

/// One function with a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FnSpan {
    /// The function's own name.
    pub name: String,
    /// The items it lies in, outermost first.
    pub scope: Vec<Scope>,
    /// Byte range of the whole item, attributes included.
    pub item: Range<usize>,
    /// 1-based first and last line of the whole item.
    pub lines: (usize, usize),
    /// Byte range of its body block, braces included.
    pub body: Range<usize>,
    /// Whether it is a `const fn`.
    pub is_const: bool,
    /// Whether it returns `impl Trait`.
    pub opaque_return: bool,
    /// Whether it is test code: a `#[test]`, `#[bench]` or `#[cfg(test)]` function, or a
    /// function inside one or inside a `#[cfg(test)]` module, `impl` or trait.
    pub test_code: bool,
}

/// Where a file does not parse: `syn`'s message, 1-based line and 0-based column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseFailure {
    /// `syn`'s message.
    pub message: String,
    /// 1-based line.
    pub line: usize,
    /// 0-based column.
    pub column: usize,
}

/// Every function of `text` (Rust source), in source order of their items (an outer
/// function before the functions nested in it). A leading byte-order mark or shebang line
/// is blanked (same length) before parsing, so that byte offsets stay those of `text`.
///
/// Errors: [`ParseFailure`] when `text` does not parse.
pub fn functions(text: &str) -> Result<Vec<FnSpan>, ParseFailure> {
    let src = crate::battery::select::inert::parsable(text);
    let parsed = parse(&src)?;
    let mut c = Collector::default();
    c.visit_file(&parsed);
    c.out
        .sort_by_key(|f| (f.item.start, std::cmp::Reverse(f.item.end)));
    Ok(c.out)
}

/// `src` parsed as a file (after [`crate::battery::select::inert::parsable`], so that spans
/// are offsets of the text). Errors: [`ParseFailure`] where `syn` stopped.
pub(crate) fn parse(src: &str) -> Result<syn::File, ParseFailure> {
    syn::parse_str(src).map_err(|e| {
        let at = e.span().start();
        ParseFailure {
            message: e.to_string(),
            line: at.line,
            column: at.column,
        }
    })
}

/// The walk: the items around the current node and whether they are test code.
#[derive(Default)]
struct Collector {
    scope: Vec<Scope>,
    in_test: bool,
    out: Vec<FnSpan>,
}

impl Collector {
    /// Records the function `sig` with `block` (the whole item spans `item`) and walks into
    /// it with `walk`.
    fn function(
        &mut self,
        attrs: &[syn::Attribute],
        sig: &syn::Signature,
        block: &syn::Block,
        item: proc_macro2::Span,
        walk: impl FnOnce(&mut Self),
    ) {
        let test_code = self.in_test || is_test_fn(attrs);
        self.out.push(FnSpan {
            name: sig.ident.to_string(),
            scope: self.scope.clone(),
            item: item.byte_range(),
            lines: (item.start().line, item.end().line),
            body: block.span().byte_range(),
            is_const: sig.constness.is_some(),
            opaque_return: returns_impl_trait(&sig.output),
            test_code,
        });
        self.within(Scope::Function(sig.ident.to_string()), test_code, walk);
    }

    /// Walks into an item that is `scope`, test code when `test` is.
    fn within(&mut self, scope: Scope, test: bool, walk: impl FnOnce(&mut Self)) {
        let was = self.in_test;
        self.in_test = was || test;
        self.scope.push(scope);
        walk(self);
        self.scope.pop();
        self.in_test = was;
    }
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item_mod(&mut self, i: &'ast syn::ItemMod) {
        let scope = Scope::Module(i.ident.to_string());
        self.within(scope, is_cfg_test(&i.attrs), |c| {
            syn::visit::visit_item_mod(c, i)
        });
    }
    fn visit_item_fn(&mut self, i: &'ast syn::ItemFn) {
        self.function(&i.attrs, &i.sig, &i.block, i.span(), |c| {
            syn::visit::visit_item_fn(c, i)
        });
    }
    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        let scope = Scope::Impl {
            self_type: self_type(&i.self_ty),
            trait_name: i.trait_.as_ref().map(|(_, t, _)| {
                t.segments
                    .last()
                    .map(|s| s.ident.to_string())
                    .unwrap_or_default()
            }),
        };
        self.within(scope, is_cfg_test(&i.attrs), |c| {
            syn::visit::visit_item_impl(c, i)
        });
    }
    fn visit_item_trait(&mut self, i: &'ast syn::ItemTrait) {
        let scope = Scope::Trait(i.ident.to_string());
        self.within(scope, is_cfg_test(&i.attrs), |c| {
            syn::visit::visit_item_trait(c, i)
        });
    }
    fn visit_impl_item_fn(&mut self, i: &'ast syn::ImplItemFn) {
        self.function(&i.attrs, &i.sig, &i.block, i.span(), |c| {
            syn::visit::visit_impl_item_fn(c, i)
        });
    }
    fn visit_trait_item_fn(&mut self, i: &'ast syn::TraitItemFn) {
        // A declaration without a body holds no code.
        if let Some(b) = &i.default {
            self.function(&i.attrs, &i.sig, b, i.span(), |c| {
                syn::visit::visit_trait_item_fn(c, i)
            });
        }
    }
}

fn self_type(ty: &syn::Type) -> SelfType {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map_or(SelfType::Other, |s| SelfType::Named(s.ident.to_string())),
        syn::Type::Reference(r) => SelfType::Reference(Box::new(self_type(&r.elem))),
        _ => SelfType::Other,
    }
}

fn returns_impl_trait(ret: &syn::ReturnType) -> bool {
    struct Finder(bool);
    impl<'ast> Visit<'ast> for Finder {
        fn visit_type_impl_trait(&mut self, _: &'ast syn::TypeImplTrait) {
            self.0 = true;
        }
    }
    let mut f = Finder(false);
    f.visit_return_type(ret);
    f.0
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && matches!(&a.meta, syn::Meta::List(l) if l.tokens.to_string().trim() == "test")
    })
}

fn is_test_fn(attrs: &[syn::Attribute]) -> bool {
    is_cfg_test(attrs)
        || attrs.iter().any(|a| {
            a.path()
                .segments
                .last()
                .is_some_and(|s| s.ident == "test" || s.ident == "bench")
        })
}
