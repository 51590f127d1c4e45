# Sourced by the test scripts: the tests' temporary files go to memory where /dev/shm has room (unless TMPDIR is set).
# The tests create and delete hundreds of thousands of small files. On ext4 without a journal (this project's CI
# machines) every file created within minutes of many deletions costs over a millisecond of kernel time (ext4
# skips each recently deleted inode, `recently_deleted`), and the suite took 15 to 32 minutes. In memory it takes
# about 12.
if [ -z "${TMPDIR:-}" ] && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] \
  && [ "$(df -Pk /dev/shm | awk 'NR == 2 { print $4 }')" -gt $((4 * 1024 * 1024)) ]; then
  export TMPDIR=/dev/shm/mc-tests  # short: Ray puts its sockets under it (107 bytes at most)
  mkdir -p "$TMPDIR"
fi
