// Recurses until the stack overflows: Rust's runtime says so ("thread
// 'main' has overflowed its stack") and aborts. Its handler is installed
// only where the default one is: traced, it must still see the default.
#[allow(unconditional_recursion)]
fn deep(n: u64) -> u64 {
    let buf = [n; 512];
    deep(n + buf[3] % 7 + 1) + buf[5]
}
fn main() {
    println!("{}", deep(0));
}
