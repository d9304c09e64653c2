//! Filesets: file sizes drawn from a size model until the files fill a byte target (a share of
//! the target's capacity), deterministic from a seed, growing level by level.

use rand::SeedableRng;

use super::model::SizeModel;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileEntry {
    pub id: u64,
    pub size: u64,
}

/// A growing fileset: `grow_to` appends files until the total reaches a byte target.
pub struct FileSet {
    model: SizeModel,
    rng: rand::rngs::StdRng,
    max_file_bytes: u64,
    pub files: Vec<FileEntry>,
    pub bytes: u64,
}

impl FileSet {
    pub fn new(model: SizeModel, seed: u64, max_file_bytes: u64) -> FileSet {
        FileSet { model, rng: rand::rngs::StdRng::seed_from_u64(seed), max_file_bytes, files: Vec::new(), bytes: 0 }
    }

    /// Draws files until the fileset holds at least `target_bytes` (the last file may pass
    /// it) or `max_files` files; returns the new files.
    pub fn grow_to(&mut self, target_bytes: u64, max_files: u64) -> &[FileEntry] {
        let first = self.files.len();
        while self.bytes < target_bytes && (self.files.len() as u64) < max_files {
            let size = self.model.sample(&mut self.rng, self.max_file_bytes);
            self.files.push(FileEntry { id: self.files.len() as u64, size });
            self.bytes += size;
        }
        &self.files[first..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::model::Family;

    #[test]
    fn filesets_fill_their_target_deterministically() {
        let m = SizeModel { family: Family::Gamma, scale_bytes: 100_000.0, shape_k: 0.5, power_p: 1.0, zero_fraction: 0.1 };
        let mut a = FileSet::new(m, 7, 4 << 20);
        let mut b = FileSet::new(m, 7, 4 << 20);
        let first = a.grow_to(10 << 20, u64::MAX).len();
        assert!(a.bytes >= 10 << 20 && a.bytes < (10 << 20) + (4 << 20), "{}", a.bytes);
        a.grow_to(20 << 20, u64::MAX);
        b.grow_to(20 << 20, u64::MAX);
        assert_eq!(a.files, b.files, "growing in two steps draws the same files as in one");
        assert!(a.files.len() > first && a.files.iter().all(|f| f.size <= 4 << 20));
        assert!(a.files.iter().any(|f| f.size == 0), "empty files are drawn");
        assert_ne!(FileSet::new(m, 8, 4 << 20).grow_to(u64::MAX, 10), &a.files[..10], "another seed, other files");
        assert_eq!(FileSet::new(m, 7, 4 << 20).grow_to(u64::MAX, 5).len(), 5);
    }
}
