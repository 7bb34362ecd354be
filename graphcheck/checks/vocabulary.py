"""The words the checks share: what a stage gives (:class:`Outcome`) and what a capture is
compared with, as the findings name it."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..findings import Allow, Finding, Report

__all__ = ["FIRST_CAPTURE", "LATER_CAPTURE", "REFERENCE_CALL", "VALIDATED_BEFORE", "VALIDATED_CAPTURE", "Outcome"]


@dataclass
class Outcome:
    """What a stage of the checks found, and what it says it did.

    Attributes:
        findings: what it found.
        ran: the checks that ran in full (a report's ``checks``).
        skipped: ``(check, why)`` of the checks that did not run, or ran only in part.
        notes: what it noticed that is no finding.
    """

    findings: list[Finding] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __iadd__(self, other: Outcome) -> Outcome:
        self.findings += other.findings
        self.ran += other.ran
        self.skipped += other.skipped
        self.notes += other.notes
        return self

    def report(self, *, allow: tuple[Allow, ...], name: str, device: str, operations: int) -> Report:
        """The outcome as a capture site's :class:`~graphcheck.Report`."""
        return Report(self.findings, allow=allow, name=name, device=device, operations=operations,
                      checks=self.ran, skipped=self.skipped, notes=self.notes)  # fmt: skip


#: What a capture is compared with, as the findings name it: an eager reference call,
#: (at a site validated before) the capture that was validated, (a guarded block after a
#: retry) the capture graphcheck made of the reference after later calls, or (a new capture
#: after a retry) the first capture.
REFERENCE_CALL = "the reference call"
VALIDATED_CAPTURE = "the validated capture"
LATER_CAPTURE = "the reference's later capture"
FIRST_CAPTURE = "the first capture"

#: Why the comparison and ownership checks did not run at a site that passed before.
VALIDATED_BEFORE = "validated before in this process (revalidate=True runs it again)"
