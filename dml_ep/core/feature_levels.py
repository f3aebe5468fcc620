"""DirectML's feature levels and the one dml_ep targets by default, in a module that imports
neither numpy nor onnx: the command line's parser offers them (``--help``) without either."""

from __future__ import annotations

import enum

from .errors import FeatureLevelError


class DML_FEATURE_LEVEL(enum.IntEnum):
    """Feature levels; ``parse("4_0")`` accepts the spellings users type."""

    FL_1_0 = 0x1000
    FL_2_0 = 0x2000
    FL_2_1 = 0x2100
    FL_3_0 = 0x3000
    FL_3_1 = 0x3100
    FL_4_0 = 0x4000
    FL_4_1 = 0x4100
    FL_5_0 = 0x5000
    FL_5_1 = 0x5100
    FL_5_2 = 0x5200
    FL_6_0 = 0x6000
    FL_6_1 = 0x6100
    FL_6_2 = 0x6200
    FL_6_3 = 0x6300
    FL_6_4 = 0x6400

    @property
    def label(self) -> str:
        """``"4_0"`` for FL_4_0: the spelling of DirectML's DML_FEATURE_LEVEL_4_0."""
        return self.name[3:]

    def __str__(self) -> str:
        return f"DML_FEATURE_LEVEL_{self.label}"

    @classmethod
    def parse(cls, text) -> "DML_FEATURE_LEVEL":
        """Accepts a member, ``"4_0"``, ``"4.0"``, ``"FL_4_0"``, ``"DML_FEATURE_LEVEL_4_0"`` or ``0x4000``."""
        if isinstance(text, cls):
            return text
        if isinstance(text, int):
            try:
                return cls(text)
            except ValueError:
                raise FeatureLevelError(f"unknown DirectML feature level {text:#x}") from None
        label = str(text).strip().upper().replace(".", "_")
        for prefix in ("DML_FEATURE_LEVEL_", "FL_", "FL"):
            label = label.removeprefix(prefix)
        try:
            return cls["FL_" + label]
        except KeyError:
            known = ", ".join(level.label for level in cls)
            raise FeatureLevelError(f"unknown DirectML feature level {text!r} (known: {known})") from None


DEFAULT_FEATURE_LEVEL = max(DML_FEATURE_LEVEL)
