//! Dataset loaders on tiny files written here, the bundled digits, the
//! seeded split and batch preparation; bad files name the file and what was
//! expected.

use std::io::Write;
use std::path::PathBuf;

use flate2::{Compression, write::GzEncoder};
use training::data::{Augment, Dataset, DatasetSpec, Transform, load, split, split_of};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stretch-data-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch");
    dir
}

fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(bytes).expect("gzip");
    e.finish().expect("gzip")
}

fn err(spec: &str) -> String {
    load(&spec.parse().expect("spec"), [8, 8])
        .expect_err("must fail")
        .to_string()
}

#[test]
fn bundled_digits_load() {
    let set = load(&DatasetSpec::Digits(None), [8, 8]).expect("bundled digits");
    assert_eq!((set.len(), set.classes(), set.image_shape()), (1797, 10, [1, 8, 8]));
    assert!(set.labels.iter().all(|&l| l < 10));
    assert_eq!(*set.pixels.iter().max().expect("pixels"), 255);
}

#[test]
fn digits_csv_and_errors() {
    let dir = scratch("digits");
    let mut line: Vec<String> = (0..64).map(|i| (i % 17).to_string()).collect();
    line.push("7".into());
    let text = format!("{}\n{}\n", line.join(","), line.join(","));
    let f = dir.join("d.csv.gz");
    std::fs::write(&f, gz(text.as_bytes())).expect("write");
    let set = load(&DatasetSpec::Digits(Some(f.clone())), [8, 8]).expect("load");
    assert_eq!((set.len(), set.label(1)), (2, 7));
    assert_eq!(set.image(0)[16], 255);
    let bad = dir.join("bad.csv");
    std::fs::write(&bad, "1,2,3\n").expect("write");
    let e = err(&format!("digits:{}", bad.display()));
    assert!(
        e.contains("bad.csv") && e.contains("line 1: 3 values") && e.contains("expected 64 pixel"),
        "{e}"
    );
    let e = err(&format!("digits:{}", dir.join("missing.csv.gz").display()));
    assert!(e.contains("missing.csv.gz: does not exist"), "{e}");
}

#[test]
fn cifar_records_and_errors() {
    let dir = scratch("cifar");
    let mut bytes = Vec::new();
    for label in [3u8, 9, 0] {
        bytes.push(label);
        bytes.extend((0..3072).map(|i| (i % 251) as u8));
    }
    std::fs::write(dir.join("data_batch_1.bin"), &bytes).expect("write");
    let set = load(&format!("cifar10:{}", dir.display()).parse().expect("spec"), [32, 32]).expect("load");
    assert_eq!((set.len(), set.image_shape(), set.label(1)), (3, [3, 32, 32], 9));
    assert_eq!(set.image(2)[1024], (1024 % 251) as u8);
    std::fs::write(dir.join("data_batch_2.bin"), &bytes[..100]).expect("write");
    let e = err(&format!("cifar10:{}", dir.display()));
    assert!(e.contains("data_batch_2.bin") && e.contains("3073 bytes"), "{e}");
    let empty = scratch("cifar-empty");
    let e = err(&format!("cifar10:{}", empty.display()));
    assert!(e.contains("no CIFAR-10 batch files"), "{e}");
}

fn idx(magic_rank: u8, dims: &[u32], data: &[u8]) -> Vec<u8> {
    let mut v = vec![0, 0, 8, magic_rank];
    for d in dims {
        v.extend_from_slice(&d.to_be_bytes());
    }
    v.extend_from_slice(data);
    v
}

#[test]
fn mnist_idx_plain_and_gzip() {
    let dir = scratch("mnist");
    let pixels: Vec<u8> = (0..3 * 4 * 4).map(|i| i as u8).collect();
    std::fs::write(dir.join("train-images-idx3-ubyte.gz"), gz(&idx(3, &[3, 4, 4], &pixels))).expect("write");
    std::fs::write(dir.join("train-labels-idx1-ubyte.gz"), gz(&idx(1, &[3], &[1, 0, 4]))).expect("write");
    let set = load(&format!("mnist:{}", dir.display()).parse().expect("spec"), [4, 4]).expect("load");
    assert_eq!((set.len(), set.image_shape(), set.classes()), (3, [1, 4, 4], 5));
    assert_eq!(set.image(1)[0], 16);
    std::fs::write(dir.join("t10k-images-idx3-ubyte"), idx(3, &[2, 4, 4], &pixels[..32])).expect("write");
    std::fs::write(dir.join("t10k-labels-idx1-ubyte"), idx(1, &[3], &[1, 2, 3])).expect("write");
    let e = err(&format!("mnist:{}", dir.display()));
    assert!(
        e.contains("t10k-labels-idx1-ubyte") && e.contains("3 labels for 2 images"),
        "{e}"
    );
    std::fs::write(dir.join("t10k-labels-idx1-ubyte"), b"not idx").expect("write");
    let e = err(&format!("mnist:{}", dir.display()));
    assert!(e.contains("not an IDX file"), "{e}");
}

#[test]
fn image_folder_classes_in_name_order() {
    let dir = scratch("folder");
    for (class, shade) in [("cat", 10u8), ("dog", 200u8)] {
        std::fs::create_dir_all(dir.join(class)).expect("mkdir");
        for k in 0..2u32 {
            let img = image::RgbImage::from_pixel(6 + k, 5, image::Rgb([shade, shade, shade]));
            img.save(dir.join(class).join(format!("{k}.png"))).expect("png");
        }
    }
    let set = load(&format!("folder:{}", dir.display()).parse().expect("spec"), [4, 4]).expect("load");
    assert_eq!((set.len(), set.classes(), set.image_shape()), (4, 2, [3, 4, 4]));
    assert_eq!((set.label(0), set.label(3)), (0, 1));
    assert_eq!((set.image(0)[0], set.image(3)[47]), (10, 200));
    assert_eq!(set.converted, ["4 of 4 images of another size, resized to 4x4"]);
    image::GrayImage::from_pixel(4, 4, image::Luma([7]))
        .save(dir.join("cat").join("grey.png"))
        .expect("png");
    image::RgbaImage::from_pixel(4, 4, image::Rgba([1, 2, 3, 4]))
        .save(dir.join("dog").join("rgba.png"))
        .expect("png");
    let set = load(&format!("folder:{}", dir.display()).parse().expect("spec"), [4, 4]).expect("load");
    assert_eq!(
        set.converted,
        [
            "1 of 6 images greyscale, repeated into RGB",
            "1 of 6 images with an alpha channel, dropped",
            "4 of 6 images of another size, resized to 4x4"
        ]
    );
    std::fs::write(dir.join("dog").join("broken.png"), b"nope").expect("write");
    let e = err(&format!("folder:{}", dir.display()));
    assert!(e.contains("broken.png") && e.contains("cannot decode"), "{e}");
}

/// MNIST's t10k files come after its training files whatever their names'
/// order, and are the validation set; `limit` takes the first training
/// images; a dataset without a test split is split at random within the
/// limit.
#[test]
fn a_test_split_of_its_own_is_the_validation_set() {
    let dir = scratch("mnist-test-split");
    let pixels: Vec<u8> = (0..5 * 4 * 4).map(|i| i as u8).collect();
    std::fs::write(dir.join("train-images-idx3-ubyte"), idx(3, &[3, 4, 4], &pixels[..48])).expect("write");
    std::fs::write(dir.join("train-labels-idx1-ubyte"), idx(1, &[3], &[1, 0, 4])).expect("write");
    std::fs::write(dir.join("t10k-images-idx3-ubyte"), idx(3, &[2, 4, 4], &pixels[48..])).expect("write");
    std::fs::write(dir.join("t10k-labels-idx1-ubyte"), idx(1, &[2], &[2, 3])).expect("write");
    let set = load(&format!("mnist:{}", dir.display()).parse().expect("spec"), [4, 4]).expect("load");
    assert_eq!(set.test_start(), Some(3));
    assert_eq!((set.label(0), set.label(3)), (1, 2), "training images first");
    let s = split_of(&set, 0.2, 1, None);
    assert_eq!(s.val, [3, 4]);
    let mut train = s.train.clone();
    train.sort();
    assert_eq!(train, [0, 1, 2]);
    let mut limited = split_of(&set, 0.2, 1, Some(2)).train;
    limited.sort();
    assert_eq!(limited, [0, 1]);
    let digits = load(&DatasetSpec::Digits(None), [8, 8]).expect("digits");
    assert_eq!(digits.test_start(), None);
    let d = split_of(&digits, 0.2, 1, Some(100));
    assert_eq!((d.train.len(), d.val.len()), (80, 20));
    assert!(d.train.iter().chain(&d.val).all(|&i| i < 100));
}

#[test]
fn split_is_seeded_and_transform_resizes_and_normalises() {
    let a = split(100, 0.2, 5);
    assert_eq!((a.train.len(), a.val.len()), (80, 20));
    assert_eq!(a, split(100, 0.2, 5));
    assert_ne!(a, split(100, 0.2, 6));
    let mut all: Vec<usize> = a.train.iter().chain(&a.val).copied().collect();
    all.sort();
    assert_eq!(all, (0..100).collect::<Vec<_>>());
    let set = load(&DatasetSpec::Digits(None), [8, 8]).expect("digits");
    let t = Transform::fit(&set, &a.train, [3, 32, 32], Augment::default()).expect("fit");
    assert_eq!(t.mean.len(), 3);
    let idx: Vec<usize> = (0..50).collect();
    let batch = t.batch(&set, &idx, None);
    assert_eq!(batch.len(), 50 * 3 * 32 * 32);
    let mean = batch.iter().map(|&v| v as f64).sum::<f64>() / batch.len() as f64;
    assert!(mean.abs() < 0.3, "normalised mean {mean}");
    assert_eq!(&batch[..1024], &batch[1024..2048], "grey repeated into three channels");
    let e = "imagenet:/x".parse::<DatasetSpec>().expect_err("unknown kind");
    assert!(e.contains("unknown dataset kind 'imagenet'"), "{e}");
}

#[test]
fn transform_at_the_source_size_normalises_every_pixel_exactly() {
    let set = load(&DatasetSpec::Digits(None), [8, 8]).expect("digits");
    let idx: Vec<usize> = (0..40).collect();
    let t = Transform::fit(&set, &idx, [3, 8, 8], Augment::default()).expect("fit");
    let batch = t.batch(&set, &idx, None);
    assert_eq!(batch.len(), 40 * 3 * 64);
    for (n, &i) in idx.iter().enumerate() {
        for c in 0..3 {
            for (k, &v) in set.image(i).iter().enumerate() {
                let want = (v as f32 / 255.0 - t.mean[c]) / t.std[c];
                assert_eq!(batch[(n * 3 + c) * 64 + k], want, "image {i} channel {c} pixel {k}");
            }
        }
    }
    let mut rng = graph_ir::rng::SplitMix64::new(3);
    let crop = Augment {
        crop_padding: 2,
        flip: true,
    };
    let mut shifted = t.clone();
    shifted.augment = crop;
    let moved = shifted.batch(&set, &idx, Some(&mut rng));
    assert_ne!(moved, batch, "crops and flips still move the pixels");
}
