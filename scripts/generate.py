"""Regenerate the files derived from the code: the manifest's JSON Schema in schemas/."""

from __future__ import annotations

from pathlib import Path

from guard.manifest import SCHEMA_FILE_NAME, json_schema

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    target = ROOT / "schemas" / SCHEMA_FILE_NAME
    target.write_text(json_schema())
    print(f"wrote {target.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
