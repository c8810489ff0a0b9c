"""Reads a `runner export` file the way a user would, in one call, and writes
what it read as JSON for export_cli_test to compare with the store.

    read_back.py READER EXPORT_FILE RESULT_JSON

READER: csv (Python's csv module: every value a string), json (json.load),
pandas-csv (pandas.read_csv), pandas-json (pandas.read_json(precise_float=True)),
pandas-parquet (pandas.read_parquet; also the file's Arrow schema).
The result: {"columns": [...], "rows": [[...], ...]} with NaN as null,
infinities as "inf" / "-inf", and
for pandas "dtypes" (and "arrow_types" for parquet). Exit 4: pandas missing.
"""
import json
import math
import sys


def plain(value):
    """A pandas / NumPy value as JSON: NaN and NaT as null, timestamps as the store writes them."""
    if value is None:
        return None
    if hasattr(value, "strftime"):  # a timestamp pandas parsed from a *_at column
        if value != value:  # NaT
            return None
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (value.microsecond // 1000)
    if hasattr(value, "item"):  # NumPy scalar
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"  # JSON has no infinity
    return value


def main():
    reader, path, result_path = sys.argv[1:4]
    if reader == "csv":
        import csv

        with open(path, newline="", encoding="utf-8") as f:
            lines = list(csv.reader(f))
        result = {"columns": lines[0], "rows": lines[1:]}
    elif reader == "json":
        with open(path, encoding="utf-8") as f:
            records = json.load(f)
        columns = list(records[0]) if records else []
        result = {"columns": columns, "rows": [[r[c] for c in columns] for r in records]}
    else:
        try:
            import pandas as pd
        except ImportError as e:
            print(e, file=sys.stderr)
            return 4
        if reader == "pandas-csv":
            df = pd.read_csv(path)
        elif reader == "pandas-json":
            df = pd.read_json(path, precise_float=True)
        elif reader == "pandas-parquet":
            df = pd.read_parquet(path)
        else:
            print("unknown reader " + reader, file=sys.stderr)
            return 2
        result = {
            "columns": [str(c) for c in df.columns],
            "dtypes": [str(t) for t in df.dtypes],
            "rows": [[plain(v) for v in row] for row in df.itertuples(index=False, name=None)],
        }
        if reader == "pandas-parquet":
            import pyarrow.parquet as pq

            result["arrow_types"] = [str(field.type) for field in pq.read_schema(path)]
    with open(result_path, "w", encoding="utf-8") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
