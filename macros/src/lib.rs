//! `#[resizealloc::region]`: runs a `fn`'s body in a resizealloc region, or each poll of an
//! `async fn`'s future (through `resizealloc::InRegion`). Re-exported by `resizealloc`; see its
//! documentation.
//!
//! On a `fn`, the body runs after a `resizealloc::RegionGuard` is entered, and its value is
//! taken before the guard ends the region, so the body's temporaries die inside it (an early
//! `return`, a `?` or a panic ends the region too). On an `async fn`, the signature stays as
//! written and the body becomes `resizealloc::InRegion::new(async move { body }).await`: every
//! poll of the body runs in a region on the thread that polls it.
//!
//! Refused, with a message: any item but a function; a function without a body (a trait's
//! required method); a `const fn` (a region is a run-time thing); arguments to the attribute.

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{Error, ItemFn, ReturnType, TraitItemFn, Type};

/// Runs the function's body in a region; on an `async fn`, each poll of its future.
/// See the crate documentation.
#[proc_macro_attribute]
pub fn region(attr: TokenStream, item: TokenStream) -> TokenStream {
    match expand(attr.into(), item.into()) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand(attr: TokenStream2, item: TokenStream2) -> Result<TokenStream2, Error> {
    if let Some(first) = attr.clone().into_iter().next() {
        return Err(Error::new(
            first.span(),
            "#[resizealloc::region] takes no arguments: write #[resizealloc::region]",
        ));
    }
    let f: ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(_) => {
            if let Ok(m) = syn::parse2::<TraitItemFn>(item.clone()) {
                return Err(Error::new(
                    m.sig.span(),
                    "#[resizealloc::region] needs a function body to run in a region; \
                     put it on the implementations of this method",
                ));
            }
            return Err(Error::new(
                first_token_span(&item),
                "#[resizealloc::region] goes on a fn or an async fn",
            ));
        }
    };
    if let Some(c) = f.sig.constness {
        return Err(Error::new(
            c.span(),
            "#[resizealloc::region] cannot go on a const fn: a region begins and ends at run time",
        ));
    }
    let ItemFn {
        attrs,
        vis,
        sig,
        block,
    } = f;
    let body = if sig.asyncness.is_some() {
        // The output annotated where it can be, so that `?` and `return` in the body know the
        // type they convert to, as they did in the async fn itself.
        let inner = match &sig.output {
            ReturnType::Type(_, ty) if !contains_impl_trait(ty) => quote_spanned! {block.span()=>
                async move {
                    let __resizealloc_output: #ty = #block;
                    __resizealloc_output
                }
            },
            ReturnType::Default => quote_spanned! {block.span()=>
                async move {
                    let __resizealloc_output: () = #block;
                    __resizealloc_output
                }
            },
            ReturnType::Type(..) => quote_spanned! {block.span()=> async move #block },
        };
        quote! {{ ::resizealloc::InRegion::new(#inner).await }}
    } else {
        // The value is taken inside the region (a `let`), so the temporaries of the body's
        // last expression die there too, before the guard ends it.
        quote! {{
            let __resizealloc_region = ::resizealloc::RegionGuard::enter();
            #[allow(clippy::let_and_return)]
            let __resizealloc_output = #block;
            __resizealloc_output
        }}
    };
    Ok(quote! {
        #(#attrs)*
        #vis #sig #body
    })
}

fn first_token_span(item: &TokenStream2) -> proc_macro2::Span {
    item.clone()
        .into_iter()
        .next()
        .map_or_else(proc_macro2::Span::call_site, |t| t.span())
}

/// Whether `ty` has an `impl Trait` anywhere (it cannot annotate a `let`).
fn contains_impl_trait(ty: &Type) -> bool {
    fn any_impl(tokens: TokenStream2) -> bool {
        tokens.into_iter().any(|t| match t {
            proc_macro2::TokenTree::Ident(i) => i == "impl",
            proc_macro2::TokenTree::Group(g) => any_impl(g.stream()),
            _ => false,
        })
    }
    any_impl(ty.to_token_stream())
}
