//! `#[resizealloc::region]`: every form it takes compiles and runs its body in a region
//! (`tests/attribute/pass/`), and what it refuses fails to compile with its message
//! (`tests/attribute/fail/`, each beside the compiler's output it must print).

#[test]
fn the_attribute_takes_every_function_form_and_refuses_the_rest_clearly() {
    let t = trybuild::TestCases::new();
    t.pass("tests/attribute/pass/*.rs");
    t.compile_fail("tests/attribute/fail/*.rs");
}
