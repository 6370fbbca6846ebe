use ctf_reader::index::{build_index, IndexingOptions};
use ctf_reader::timeline::Timeline;
use ctf_reader::ReaderConfig;
use std::sync::Arc;
use std::time::Instant;
fn main() {
    let path = std::env::args().nth(1).unwrap();
    let (config, _) = ReaderConfig::from_file(std::path::Path::new(&path), None).unwrap();
    let options = IndexingOptions::for_config(&config);
    let opened = build_index(&config, &options).unwrap();
    let index = Arc::new(opened.index.clone());
    for i in 0..6 {
        let t = Instant::now();
        let tl = Timeline::new(Arc::clone(&index), &config).unwrap();
        eprintln!("run {i}: {:.2} ms", t.elapsed().as_secs_f64() * 1e3);
        if i == 0 {
            std::mem::forget(tl);
        } else {
            drop(tl);
        }
    }
}
