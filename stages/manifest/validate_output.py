"""ValidateOutput: check every committed file before ``_SUCCESS`` says the job succeeded."""

from __future__ import annotations

from dataclasses import dataclass

from ...entry_file import EntryFile, FileToCommit
from ...errors import OutputValidationError
from ...parallel import run_bounded
from ...statistic_names import JOB_STAGE_OPTIONAL_VALIDATE_OUTPUT
from ..base import Stage


@dataclass(frozen=True, slots=True)
class ValidateOutputArguments:
    entry_file: EntryFile


@dataclass(frozen=True, slots=True)
class ValidateOutputResult:
    files_validated: int


class ValidateOutputStage(Stage[ValidateOutputArguments, ValidateOutputResult]):
    """Probe every destination in parallel: it must be a file of the manifest's size, with the manifest's
    etag where the store keeps etags through a rename.

    Runs before ``_SUCCESS`` is written and before cleanup, unlike Hadoop's (which validates after writing it), so a
    failed check never leaves a ``_SUCCESS`` that claims success. Postcondition: nothing in the store has changed.
    """

    name = JOB_STAGE_OPTIONAL_VALIDATE_OUTPUT

    def execute(self, arguments: ValidateOutputArguments) -> ValidateOutputResult:
        count = 0

        def absorb(validated: int) -> None:
            nonlocal count
            count += validated

        run_bounded(
            self.context.pool,
            arguments.entry_file.batches(self.config.rename_batch_size),
            self._validate_batch,
            max_in_flight=self.context.max_in_flight,
            on_result=absorb,
        )
        return ValidateOutputResult(count)

    def _validate_batch(self, rows: list[FileToCommit]) -> int:
        compare_etags = self.capabilities.etags_preserved_in_rename
        for _, dest, size, etag, dest_url in rows:
            found = self.info(dest)
            if found is None:
                raise OutputValidationError(f"{dest_url}: expected a committed file, but nothing is there")
            if found.is_dir:
                raise OutputValidationError(f"{dest_url}: expected a committed file, but found a directory")
            if compare_etags and etag is not None and found.etag is not None and found.etag != etag:
                raise OutputValidationError(
                    f"{dest_url}: etag {found.etag!r} differs from the manifest's {etag!r} (length {found.size})"
                )
            if found.size != size:
                raise OutputValidationError(
                    f"{dest_url}: expected a file of length {size} but found one of length {found.size}"
                )
        return len(rows)
