#![no_main]
use libfuzzer_sys::fuzz_target;
fuzz_target!(|data: &[u8]| mcp_write_guard_fuzz_props::check_envelope(data));
