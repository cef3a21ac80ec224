//! Compiled-component cache. Compiling a component with Cranelift takes far longer
//! than starting the server should, so compiled code is stored as `.cwasm` files
//! keyed by the component's SHA-256 and the engine's compatibility hash.
//!
//! Deserialising compiled code is `unsafe`: wasmtime runs it as native code. So
//! each file is sealed with an HMAC-SHA256 tag, computed when it was compiled
//! under a key kept in the cache directory (`cache.key`, readable only by the
//! gateway's user), and checked before the file is deserialised. A file whose
//! tag is missing or wrong (tampered, truncated, or written by someone without
//! the key) is recompiled from the component, never loaded.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::Path;

use anyhow::Context;
use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

type Tag = hmac::Hmac<sha2_hmac::Sha256>;

const KEY_FILE: &str = "cache.key";

pub fn load_component(engine: &Engine, bytes: &[u8], cache_dir: &Path) -> anyhow::Result<Component> {
    let digest = hex::encode(Sha256::digest(bytes));
    let mut hasher = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    let path = cache_dir.join(format!("{}-{:016x}.cwasm", &digest[..32], hasher.finish()));
    let tag_path = path.with_extension("cwasm.tag");
    let key = cache_key(cache_dir)?;

    if let (Ok(compiled), Ok(tag)) = (std::fs::read(&path), std::fs::read(&tag_path)) {
        if tagger(&key).chain_update(&compiled).verify_slice(&tag).is_ok() {
            // SAFETY: the bytes carry a valid tag under this cache's key, so
            // they are what `Component::serialize` wrote for a component with
            // this digest and an engine with this compatibility hash.
            match unsafe { Component::deserialize(engine, &compiled) } {
                Ok(component) => return Ok(component),
                Err(e) => tracing::warn!(path = %path.display(), error = %e, "discarding unusable compiled component"),
            }
        } else {
            tracing::warn!(path = %path.display(), "compiled component failed its integrity check; recompiling");
        }
    }

    let component = Component::new(engine, bytes);
    release_compiler_memory();
    let component = component?;
    let compiled = component.serialize()?;
    let tag = tagger(&key).chain_update(&compiled).finalize().into_bytes();
    // Write-then-rename so concurrent starts never read a half-written file;
    // the tag goes last, so a file is only ever trusted with its own tag.
    let written = write_atomically(&path, &compiled).and_then(|()| write_atomically(&tag_path, &tag));
    if written.is_err() {
        tracing::warn!(path = %path.display(), "could not cache compiled component");
    }
    Ok(component)
}

/// Compiling a component leaves Cranelift's working memory, about 10 MiB, in
/// glibc's free lists, which keep it from the kernel for good: a gateway that
/// compiled at start was a third larger than one that found its cache. (The
/// `tollgate` binary allocates with jemalloc, which hands it back by itself;
/// glibc still serves C code and test binaries.)
///
/// The compiler's machine code stays mapped too: about 6 MiB of the binary's
/// text (Cranelift, its assembler and register allocator, the wasm parser)
/// stayed resident for the life of a gateway that compiled once, a tenth of
/// its memory at 64 concurrent requests. The kernel keeps a page of code
/// mapped once it ran, and maps its neighbours with it (fault-around), until
/// the process ends. So the text's pages are unmapped after a compile: they
/// are clean copies of the executable file, and whatever runs next maps its
/// own pages back from the page cache (minor faults, a few milliseconds in
/// all), so only the code in use stays resident.
fn release_compiler_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only hands free pages back; it touches no live block.
    unsafe {
        libc::malloc_trim(0);
    }
    #[cfg(target_os = "linux")]
    if let Err(error) = unmap_resident_text() {
        tracing::debug!(%error, "could not release the compiler's code pages");
    }
}

/// Drops this executable's code pages from the process's page tables
/// (`MADV_DONTNEED` on its executable mapping). Code is a private, read-only
/// mapping of the file that nothing writes (no text relocations), so each
/// page refaults with the same bytes from the page cache.
#[cfg(target_os = "linux")]
fn unmap_resident_text() -> std::io::Result<()> {
    let here = unmap_resident_text as *const () as usize;
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    let text = maps.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let (start, end) = fields.next()?.split_once('-')?;
        let (start, end) = (
            usize::from_str_radix(start, 16).ok()?,
            usize::from_str_radix(end, 16).ok()?,
        );
        let executable = fields.next()?.starts_with("r-x");
        // Only a mapping of a file (it has a path) can be refaulted from it.
        let file_backed = fields.nth(3).is_some();
        (executable && file_backed && (start..end).contains(&here)).then_some((start, end))
    });
    let Some((start, end)) = text else {
        return Err(std::io::Error::other("no executable file mapping holds this code"));
    };
    // SAFETY: the range is exactly one private file mapping of code; DONTNEED
    // on such a mapping only drops page-table entries, and the next access
    // maps the file's unchanged page again.
    let result = unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
    match result {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

fn tagger(key: &[u8]) -> Tag {
    <Tag as KeyInit>::new_from_slice(key).expect("HMAC takes keys of any length")
}

/// The cache's sealing key, made on first use (32 random bytes, mode 0600).
fn cache_key(cache_dir: &Path) -> anyhow::Result<Vec<u8>> {
    let path = cache_dir.join(KEY_FILE);
    if let Ok(key) = std::fs::read(&path)
        && key.len() >= 32
    {
        return Ok(key);
    }
    let key: [u8; 32] = rand::random();
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    write_private(&tmp, &key).with_context(|| format!("cannot write {}", tmp.display()))?;
    // Two starts racing: the first rename wins and both read the winner's key.
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))?;
    std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(bytes)
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal component (an empty one compiles in milliseconds).
    fn component_bytes() -> Vec<u8> {
        wat::parse_str("(component)").unwrap()
    }

    fn cached_files(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
        let cwasm = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "cwasm"))
            .expect("a compiled file was cached");
        let tag = cwasm.with_extension("cwasm.tag");
        (cwasm, tag)
    }

    /// Resident KiB of this executable's code mapping.
    #[cfg(target_os = "linux")]
    fn resident_text_kib() -> u64 {
        let here = unmap_resident_text as *const () as usize;
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut in_text = false;
        for line in smaps.lines() {
            if let Some((range, rest)) = line.split_once(' ')
                && let Some((start, end)) = range.split_once('-')
                && let (Ok(start), Ok(end)) = (usize::from_str_radix(start, 16), usize::from_str_radix(end, 16))
            {
                in_text = rest.starts_with("r-x") && (start..end).contains(&here);
            } else if in_text && let Some(kib) = line.strip_prefix("Rss:") {
                return kib.trim().trim_end_matches(" kB").parse().unwrap();
            }
        }
        panic!("no code mapping holds this test");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_compilers_code_pages_are_released_and_code_still_runs_after() {
        // Compiling maps the compiler's code in.
        let engine = Engine::default();
        let dir = tempfile::tempdir().unwrap();
        drop(wasmtime::component::Component::new(&engine, component_bytes()).unwrap());
        let before = resident_text_kib();
        unmap_resident_text().unwrap();
        let after = resident_text_kib();
        assert!(after < before / 2, "resident code {before} KiB -> {after} KiB");
        // Everything still runs, the compiler included: pages map back in.
        load_component(&engine, &component_bytes(), dir.path()).unwrap();
        assert!(resident_text_kib() > after);
    }

    #[test]
    fn a_tampered_cache_file_is_recompiled_never_loaded() {
        let engine = Engine::default();
        let dir = tempfile::tempdir().unwrap();
        let bytes = component_bytes();
        load_component(&engine, &bytes, dir.path()).unwrap();
        let (cwasm, tag) = cached_files(dir.path());
        let original = std::fs::read(&cwasm).unwrap();
        assert!(tag.is_file());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "the key is private");
        }

        // Flip one byte of the compiled code: the tag no longer matches, so the
        // file is replaced by a fresh compile (byte-identical to the original).
        let mut tampered = original.clone();
        let middle = tampered.len() / 2;
        tampered[middle] ^= 0xff;
        std::fs::write(&cwasm, &tampered).unwrap();
        load_component(&engine, &bytes, dir.path()).unwrap();
        assert_eq!(std::fs::read(&cwasm).unwrap(), original, "recompiled and rewritten");

        // A file with no tag, or a tag made without the key, is not trusted either.
        std::fs::remove_file(&tag).unwrap();
        std::fs::write(&cwasm, &tampered).unwrap();
        load_component(&engine, &bytes, dir.path()).unwrap();
        assert_eq!(std::fs::read(&cwasm).unwrap(), original);
        std::fs::write(&cwasm, &tampered).unwrap();
        let forged = tagger(b"someone else's key")
            .chain_update(&tampered)
            .finalize()
            .into_bytes();
        std::fs::write(&tag, forged).unwrap();
        load_component(&engine, &bytes, dir.path()).unwrap();
        assert_eq!(std::fs::read(&cwasm).unwrap(), original);
    }
}
