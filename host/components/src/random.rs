//! Randomness for components that ask for it (`wasi:random`): a guardrail's
//! libraries seed their hash maps from it (regular expressions, JSON Schema
//! validators), and trap without it. Randomness is neither a secret, a clock
//! nor I/O, so granting it widens nothing; it comes from the operating
//! system's source. A request for more bytes than [`MAX_BYTES`] traps.

use wasmtime::component::{Component, Linker};

/// Most random bytes one call may ask for.
const MAX_BYTES: u64 = 64 << 10;

/// Defines the `wasi:random` interfaces `component` imports (whatever their
/// 0.2 patch version), before the rest are linked to traps.
pub(crate) fn link<T: 'static>(
    linker: &mut Linker<T>,
    component: &Component,
    engine: &wasmtime::Engine,
) -> anyhow::Result<()> {
    let imports: Vec<String> = component
        .component_type()
        .imports(engine)
        .map(|(name, _)| name.to_string())
        .collect();
    for name in imports {
        if name.starts_with("wasi:random/random@") || name.starts_with("wasi:random/insecure@") {
            let secure = name.starts_with("wasi:random/random@");
            let mut instance = linker.instance(&name)?;
            let (bytes, number) = match secure {
                true => ("get-random-bytes", "get-random-u64"),
                false => ("get-insecure-random-bytes", "get-insecure-random-u64"),
            };
            instance.func_wrap(bytes, |_, (len,): (u64,)| Ok((random_bytes(len)?,)))?;
            instance.func_wrap(number, |_, (): ()| Ok((random_u64()?,)))?;
        } else if name.starts_with("wasi:random/insecure-seed@") {
            let mut instance = linker.instance(&name)?;
            instance.func_wrap("insecure-seed", |_, (): ()| Ok(((random_u64()?, random_u64()?),)))?;
        }
    }
    Ok(())
}

fn random_bytes(len: u64) -> wasmtime::Result<Vec<u8>> {
    if len > MAX_BYTES {
        wasmtime::bail!("asked for {len} random bytes; at most {MAX_BYTES} per call");
    }
    let mut bytes = vec![0u8; len as usize];
    getrandom::fill(&mut bytes).map_err(|e| wasmtime::format_err!("no randomness: {e}"))?;
    Ok(bytes)
}

fn random_u64() -> wasmtime::Result<u64> {
    getrandom::u64().map_err(|e| wasmtime::format_err!("no randomness: {e}"))
}
