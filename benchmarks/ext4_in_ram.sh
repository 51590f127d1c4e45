#!/usr/bin/env bash
# An ext4 file system in RAM (a loop device over /dev/shm), to measure a local file system without this
# machine's root file system (ext4 without a journal, which charges file creations for recent deletions).
# Needs root; prints the mount point:
#   TMPDIR=$(bash benchmarks/ext4_in_ram.sh) python benchmarks/bench_frameworks.py --repeat 5
# Remove it with: umount /mnt/bench-ext4 && rm /dev/shm/bench-ext4.img
set -euo pipefail
MOUNT="${1:-/mnt/bench-ext4}"
IMAGE=/dev/shm/bench-ext4.img
if ! mountpoint -q "$MOUNT"; then
  truncate -s "${SIZE:-4G}" "$IMAGE"
  # An inode per 4 KiB (a million): bench_frameworks.py keeps every run's 10,000 files and directories.
  mkfs.ext4 -q -F -i 4096 "$IMAGE"
  mkdir -p "$MOUNT"
  mount -o loop "$IMAGE" "$MOUNT"
fi
echo "$MOUNT"
