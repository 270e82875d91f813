"""The report room: a validation run's report folder, written, read, verified, signed, compared.

The validator (:mod:`envbuild.validate`) produces a :class:`~envbuild.report.model.Report` and writes it
with :func:`envbuild.report.write.write_report`; everything else here reads report folders copied off a
machine (``envbuild report verify|sign|diff|fleet``) and never imports :mod:`envbuild.validate`: the
report sits below the validator in the layers (docs/architecture.md, tests/test_structure.py).

- :mod:`.model`: report.json's dataclasses (``Report``, ``StageResult``, ...);
- :mod:`.folder`: the folder's file names (``MANIFEST``, ``SIGNATURE``), run folders, atomic writes;
- :mod:`.write`: every file of a run (json, :mod:`.markdown`, :mod:`.junit`, :mod:`.html`), then the
  manifest; :mod:`.redact`: what may enter them;
- :mod:`.verify`: a folder against its manifest, a report's verdict from its stages;
- :mod:`.sign`: the manifest signed with the renter's SSH key; :mod:`.diff`: two reports compared;
- :mod:`.fleet` (+ :mod:`.fleet_group`): the lots of an order side by side;
- :mod:`.hardware`: the ``hardware`` section for people (report.md, diff, fleet).

This module imports nothing, so ``import envbuild.report.verify`` loads only what verify needs.
"""
