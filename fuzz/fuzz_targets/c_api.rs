//! The C ABI driven by a fuzzed call sequence. Each input byte picks a call (with operands
//! from the following bytes) on a small state of handles: configurations, a reader, the
//! minibatches handed out (kept, freed in any order, also after their reader), checkpoints
//! (valid or fuzzed bytes), views and DLPack tensors whose memory is read in full, NULL
//! arguments. Every call must return a documented status (never `CTF_STATUS_PANIC`), write
//! its out-parameter only on success, and leave every handle usable; under AddressSanitizer
//! (`cargo fuzz` builds with it by default) a use after free or a leak fails the run.

#![no_main]

use std::ffi::{c_char, c_int, CStr, CString};
use std::ptr;
use std::sync::OnceLock;

use ::ctf_reader::ffi::config::*;
use ::ctf_reader::ffi::dlpack::*;
use ::ctf_reader::ffi::minibatch::*;
use ::ctf_reader::ffi::reader::*;
use ::ctf_reader::ffi::status::*;
use libfuzzer_sys::fuzz_target;

/// The BrainScript text of a reader over a small data file written at start-up.
fn config_text() -> &'static CString {
    static TEXT: OnceLock<CString> = OnceLock::new();
    TEXT.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("ctf-fuzz-c-api-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let data = dir.join("d.ctf");
        let mut text = String::new();
        for id in 0..60u64 {
            for t in 0..1 + id % 4 {
                text.push_str(&format!("{id} |x {id} {t} |y {}:1\n", (id + t) % 5));
            }
        }
        text.push_str("60 |x 1e99\n61 |x 1 2 3\n");
        std::fs::write(&data, text).unwrap();
        CString::new(format!(
            "reader = [ file = \"{}\" ; chunkSizeInBytes = 200 ; randomizationWindow = 2 ; \
             maxErrors = 1 ; traceLevel = 0\n input = [ x = [ dim = 2 ; format = \"dense\" ] ; \
             y = [ dim = 5 ; format = \"sparse\" ] ] ]\n",
            data.display()
        ))
        .unwrap()
    })
}

/// Bytes of the input, taken in order (zeros once it runs out).
struct Ops<'a>(&'a [u8]);

impl Ops<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(std::array::from_fn(|_| self.byte()))
    }
    fn small(&mut self) -> u64 {
        u64::from(self.byte())
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.byte()).collect()
    }
}

/// Reads every byte of `len` elements at `p` (ASan checks the memory is live).
fn touch<T: Copy>(p: *const T, len: usize) -> u64 {
    if p.is_null() || len == 0 {
        return 0;
    }
    // SAFETY: the ABI promises `len` readable elements at a non-NULL `p`.
    let bytes =
        unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len * std::mem::size_of::<T>()) };
    bytes.iter().map(|&b| u64::from(b)).sum()
}

fn documented(st: ctf_status) -> ctf_status {
    assert_ne!(st, ctf_status::Panic, "a panic crossed into the C ABI");
    // SAFETY: ctf_status_str returns a static NUL-terminated string for every status.
    let name = unsafe { CStr::from_ptr(ctf_status_str(st as c_int)) };
    assert!(!name.to_bytes().is_empty());
    st
}

fn check_message(p: *const c_char) {
    assert!(!p.is_null());
    // SAFETY: message getters return a NUL-terminated string valid until the next failure.
    let _ = unsafe { CStr::from_ptr(p) }.to_bytes().len();
}

fuzz_target!(|data: &[u8]| {
    let text = config_text();
    let name = c"fuzz.cntk";
    let mut ops = Ops(data);
    let mut configs: Vec<*mut ctf_config> = Vec::new();
    let mut reader: *mut ctf_reader = ptr::null_mut();
    let mut minibatches: Vec<*mut ctf_minibatch> = Vec::new();
    let mut checkpoints: Vec<Vec<u8>> = Vec::new();
    // SAFETY (whole block): every handle passed is live (created here and not yet freed) or
    // NULL, every out-pointer points to a local, and each handle is freed exactly once.
    unsafe {
        for _ in 0..64 {
            if ops.0.is_empty() {
                break;
            }
            let config = configs.last().copied().unwrap_or(ptr::null_mut());
            match ops.byte() % 16 {
                0 => {
                    let mut c = ptr::null_mut();
                    let st = documented(ctf_config_from_brainscript(
                        text.as_ptr(),
                        name.as_ptr(),
                        ptr::null(),
                        &mut c,
                    ));
                    assert_eq!(st, ctf_status::Ok);
                    configs.push(c);
                }
                1 => {
                    // A configuration from fuzzed text.
                    let n = ops.small() as usize;
                    let mut raw = ops.bytes(n);
                    raw.retain(|&b| b != 0);
                    let fuzzed = CString::new(raw).unwrap();
                    let mut c = ptr::null_mut();
                    let st = documented(ctf_config_from_brainscript(
                        fuzzed.as_ptr(),
                        name.as_ptr(),
                        ptr::null(),
                        &mut c,
                    ));
                    if st == ctf_status::Ok {
                        configs.push(c);
                    } else {
                        assert!(c.is_null(), "out-parameter written on failure");
                        check_message(ctf_last_error_message());
                    }
                }
                2 => {
                    let v = ops.small();
                    let st = match ops.byte() % 9 {
                        0 => ctf_config_set_max_sweeps(config, v % 4),
                        1 => ctf_config_set_max_samples(config, ops.u64() % 5000),
                        2 => ctf_config_set_threads(config, (v % 5) as usize),
                        3 => ctf_config_set_prefetch(config, (v % 4) as usize),
                        4 => ctf_config_set_partition(config, (v % 3) as u32, (v % 4) as u32),
                        5 => ctf_config_set_epoch_size(config, v * 7),
                        6 => ctf_config_set_randomize(config, v % 2 == 0),
                        7 => ctf_config_set_chunk_size(config, v * 50),
                        _ => {
                            let s = CString::new(
                                [
                                    "64",
                                    "8*2:32",
                                    "",
                                    "0",
                                    "x",
                                    "1*0:2",
                                    "99999999999999999999",
                                ][(v % 7) as usize],
                            )
                            .unwrap();
                            ctf_config_set_minibatch_schedule(config, s.as_ptr())
                        }
                    };
                    documented(st);
                    if !config.is_null() && st != ctf_status::Ok {
                        check_message(ctf_config_message(config));
                    }
                }
                3 => {
                    let mut r = ptr::null_mut();
                    let st = documented(ctf_reader_new(config, &mut r));
                    if st == ctf_status::Ok {
                        ctf_reader_free(reader);
                        reader = r;
                    } else {
                        assert!(r.is_null(), "out-parameter written on failure");
                    }
                }
                4 | 5 | 6 => {
                    let size = ops.small() % 40;
                    let mut mb = ptr::null_mut();
                    let st = documented(ctf_reader_next(reader, size, &mut mb));
                    if st == ctf_status::Ok {
                        minibatches.push(mb);
                    } else {
                        assert!(mb.is_null(), "out-parameter written on failure");
                        if !reader.is_null() {
                            check_message(ctf_reader_message(reader));
                        }
                    }
                }
                7 => {
                    if !minibatches.is_empty() {
                        let i = ops.small() as usize % minibatches.len();
                        ctf_minibatch_free(minibatches.swap_remove(i));
                    }
                }
                8 => {
                    let mut buf = [0u8; 32];
                    let mut written = 0usize;
                    let cap = (ops.small() % 33) as usize;
                    let st = documented(ctf_reader_checkpoint(
                        reader,
                        buf.as_mut_ptr(),
                        cap,
                        &mut written,
                    ));
                    if st == ctf_status::Ok {
                        assert!(written <= cap);
                        checkpoints.push(buf[..written].to_vec());
                    }
                }
                9 => {
                    let bytes = if !checkpoints.is_empty() && ops.byte() % 2 == 0 {
                        checkpoints[ops.small() as usize % checkpoints.len()].clone()
                    } else {
                        let n = ops.small() as usize % 24;
                        ops.bytes(n)
                    };
                    documented(ctf_reader_restore(reader, bytes.as_ptr(), bytes.len()));
                }
                10 => {
                    if let Some(&mb) = minibatches.last() {
                        let stream = ops.small() as usize % 3;
                        let mut info = std::mem::zeroed::<ctf_minibatch_info>();
                        if documented(ctf_minibatch_get_info(mb, &mut info)) == ctf_status::Ok {
                            touch(info.keys, info.sequences);
                        }
                        let mut v = std::mem::zeroed::<ctf_stream_view>();
                        if documented(ctf_minibatch_stream(mb, stream, &mut v)) == ctf_status::Ok {
                            let elem = if v.element_type == ctf_element_type::Float32 {
                                4
                            } else {
                                8
                            };
                            touch(v.values.cast::<u8>(), v.value_count * elem);
                            if v.storage == ctf_storage::Sparse {
                                touch(v.row_indices, v.value_count);
                                touch(v.column_starts, v.samples + 1);
                            }
                            touch(v.sequence_starts, v.sequences);
                            touch(v.sequence_lengths, v.sequences);
                        }
                        let mut p = std::mem::zeroed::<ctf_padded_view>();
                        if documented(ctf_minibatch_padded(mb, stream, &mut p)) == ctf_status::Ok {
                            let cells = p.batch * p.max_len;
                            let elem = if p.element_type == ctf_element_type::Float32 {
                                4
                            } else {
                                8
                            };
                            touch(p.values.cast::<u8>(), cells * p.dim * elem);
                            touch(p.mask, cells);
                        }
                    }
                }
                11 => {
                    if let Some(&mb) = minibatches.last() {
                        // Every part, and the numbers next to them, which are none.
                        let part = c_int::from(ops.byte() % 8) - 1;
                        let mut t = ptr::null_mut();
                        let st = documented(ctf_minibatch_dlpack(
                            mb,
                            ops.small() as usize % 3,
                            part,
                            &mut t,
                        ));
                        if st == ctf_status::Ok {
                            // Free the minibatch first sometimes: the tensor keeps the buffers.
                            if ops.byte() % 2 == 0 {
                                let i = minibatches.len() - 1;
                                ctf_minibatch_free(minibatches.swap_remove(i));
                            }
                            let deleter = (*t).deleter.expect("a deleter");
                            deleter(t);
                        }
                    }
                }
                12 => {
                    // The reader goes; its minibatches stay valid.
                    ctf_reader_free(reader);
                    reader = ptr::null_mut();
                }
                13 => {
                    if !configs.is_empty() {
                        let i = ops.small() as usize % configs.len();
                        ctf_config_free(configs.swap_remove(i));
                    }
                }
                14 => {
                    // NULL arguments.
                    let mut mb = ptr::null_mut();
                    assert_eq!(
                        documented(ctf_reader_next(reader, 4, ptr::null_mut())),
                        ctf_status::NullArgument
                    );
                    assert_eq!(
                        documented(ctf_reader_next(ptr::null_mut(), 4, &mut mb)),
                        ctf_status::NullArgument
                    );
                    assert_eq!(
                        documented(ctf_reader_new(ptr::null(), ptr::null_mut())),
                        ctf_status::NullArgument
                    );
                    assert_eq!(
                        documented(ctf_reader_restore(reader, ptr::null(), 20)),
                        ctf_status::NullArgument
                    );
                    assert_eq!(ctf_reader_stream_count(ptr::null()), 0);
                    ctf_minibatch_free(ptr::null_mut());
                    ctf_reader_free(ptr::null_mut());
                    ctf_config_free(ptr::null_mut());
                }
                _ => {
                    let mut counters = std::mem::zeroed::<ctf_counters>();
                    documented(ctf_reader_counters(reader, &mut counters));
                    let mut progress = std::mem::zeroed::<ctf_progress>();
                    documented(ctf_reader_progress(reader, &mut progress));
                    if !reader.is_null() {
                        let n = ctf_reader_stream_count(reader);
                        let mut info = std::mem::zeroed::<ctf_stream_info>();
                        let st = documented(ctf_reader_stream_info(
                            reader,
                            ops.small() as usize % (n + 1),
                            &mut info,
                        ));
                        if st == ctf_status::Ok {
                            check_message(info.name);
                        }
                    }
                }
            }
        }
        for mb in minibatches {
            ctf_minibatch_free(mb);
        }
        ctf_reader_free(reader);
        for c in configs {
            ctf_config_free(c);
        }
    }
});
