# What the model is told about a session's data files, computed in the
# session's own kernel. Run by `profile.rs` through `exec` with a dict of its
# own as globals, so that nothing lands in the person's namespace; REQUEST
# (a JSON string) is the one name it is given:
#   {"files": [{"path": "/home/user/a.csv", "kind": "csv"}, ...],
#    "budget_s": 5.0, "marker": "..."}
# It prints one line: the marker, then a JSON list with one profile per file,
# in the order asked. Everything it prints is bounded here and again by the
# server, which trusts none of it.


def _main(request):
    import json
    import time
    import warnings

    request = json.loads(request)
    deadline = time.monotonic() + float(request["budget_s"])
    # Read whole when this small: exact row counts and dtypes from all rows.
    full_bytes = 8 * 1024 * 1024
    # Bigger files: dtypes from this many first rows.
    sample_rows = 2000
    max_columns = 40
    max_keys = 40
    head_lines = 5
    # A text column's distinct values are sent when it has at most this
    # many, each up to `value_chars` long, while `values_left` lasts (for all
    # files together): the server matches a question's words against them.
    max_distinct = 200
    value_chars = 60
    values_left = [16 * 1024]

    def cut(text, n):
        text = str(text)
        return text if len(text) <= n else text[: n - 1] + "…"

    def out_of_time():
        return time.monotonic() > deadline

    def count_lines(path):
        """Lines in the file, counted in chunks until the time is up."""
        lines, last, exact = 0, b"\n", True
        with open(path, "rb") as f:
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                lines += chunk.count(b"\n")
                last = chunk[-1:]
                if out_of_time():
                    exact = False
                    break
        if exact and last != b"\n":
            lines += 1
        return lines, exact

    def head_of(path):
        with open(path, "rb") as f:
            data = f.read(64 * 1024)
        text = data.decode("utf-8", errors="replace")
        return [cut(line, 200) for line in text.splitlines()[:head_lines]]

    def text_values(frame):
        """[name, [value, ...]] for the text columns with few distinct values,
        most common first."""
        found = []
        for name in list(frame.columns)[:max_columns]:
            column = frame[name]
            if isinstance(column, type(frame)) or str(column.dtype) not in ("object", "str", "string", "category"):
                continue
            counts = column.dropna().astype(str).value_counts()
            if len(counts) > max_distinct:
                continue
            values = []
            for value in counts.index:
                if 0 < len(value) <= value_chars and values_left[0] > len(value) + 4:
                    values_left[0] -= len(value) + 4
                    values.append(value)
            if values:
                found.append([cut(name, 80), values])
        return found

    def table(frame, rows, exact):
        columns = [[cut(name, 80), cut(dtype, 40)] for name, dtype in frame.dtypes.astype(str).items()]
        sample = [
            [cut(value, 60) for value in row[:max_columns]]
            for row in frame.head(3).itertuples(index=False, name=None)
        ]
        return {
            "kind": "table",
            "rows": int(rows),
            "rows_exact": bool(exact),
            "columns": columns[:max_columns],
            "columns_total": len(columns),
            "sample": sample,
            "values": text_values(frame),
        }

    def header_line(start, sep):
        """The line the header is on, counted from 0: past a title or a
        comment above it, which has fewer fields, or fewer filled ones, than
        the rows that follow."""
        import csv
        import statistics

        lines = start.splitlines()[:30]
        if len(start) >= 64 * 1024:
            lines = lines[:-1]
        shapes = []
        for line in lines:
            fields = next(csv.reader([line], delimiter=sep), [])
            shapes.append((len(fields), sum(1 for f in fields if f.strip())))
        # Too short to tell; or a blank first line, which pandas skips.
        if len(shapes) < 4 or not lines[0].strip():
            return 0
        # What a row of the table looks like: the lines after the first.
        fields = statistics.median_low(n for n, _ in shapes[1:])
        filled = statistics.median_low(k for _, k in shapes[1:])
        first_fields, first_filled = shapes[0]
        if not (first_fields < fields or (filled >= 3 and first_filled * 2 < filled)):
            return 0
        for i, (n, k) in enumerate(shapes[1:11], 1):
            if n >= fields and k * 2 >= filled and k >= 1:
                return i
        return 0

    def delimited(path, kind):
        import csv
        import os

        import pandas as pd

        with open(path, "rb") as f:
            start = f.read(64 * 1024).decode("utf-8-sig", errors="replace")
        if kind == "tsv":
            sep = "\t"
        else:
            sep = ","
            for line in start.splitlines()[:20]:
                try:
                    sep = csv.Sniffer().sniff(line, delimiters=",;\t|").delimiter
                    break
                except csv.Error:
                    continue
        skip = header_line(start, sep)
        options = {"sep": sep, "encoding_errors": "replace", "low_memory": False}
        if skip:
            options["skiprows"] = skip
        if os.path.getsize(path) <= full_bytes:
            frame = pd.read_csv(path, **options)
            profile = table(frame, len(frame), True)
        else:
            frame = pd.read_csv(path, nrows=sample_rows, **options)
            lines, _ = count_lines(path)
            # Quoted line breaks make this an estimate.
            profile = table(frame, max(lines - 1 - skip, len(frame)), False)
        profile["header_line"] = skip
        profile["sep"] = sep
        return profile

    def excel(path):
        import os

        import openpyxl
        import pandas as pd

        book = openpyxl.load_workbook(path, read_only=True, data_only=True)
        try:
            sheets = [cut(name, 60) for name in book.sheetnames[:20]]
            first = book[book.sheetnames[0]]
            declared = first.max_row
            sheets_total = len(book.sheetnames)
        finally:
            book.close()
        if os.path.getsize(path) <= full_bytes // 4:
            frame = pd.read_excel(path, sheet_name=0)
            profile = table(frame, len(frame), True)
        else:
            frame = pd.read_excel(path, sheet_name=0, nrows=sample_rows)
            rows = max((declared or 1) - 1, len(frame))
            profile = table(frame, rows, False)
        profile["sheets"] = sheets
        profile["sheets_total"] = sheets_total
        return profile

    def parquet(path):
        import pyarrow.parquet as pq

        file = pq.ParquetFile(path)
        try:
            batch = next(file.iter_batches(batch_size=3), None)
            if batch is None:
                frame = file.schema_arrow.empty_table().to_pandas()
            else:
                frame = batch.to_pandas()
            return table(frame, file.metadata.num_rows, True)
        finally:
            file.close()

    def describe(value):
        if isinstance(value, dict):
            return "object with %d keys" % len(value)
        if isinstance(value, list):
            if value and all(isinstance(v, dict) for v in value[:100]):
                return "list of %d objects" % len(value)
            return "list of %d" % len(value)
        if value is None:
            return "null"
        return type(value).__name__

    def records(items, rows, exact):
        import pandas as pd

        frame = pd.DataFrame.from_records(items[:sample_rows])
        profile = table(frame, rows, exact)
        profile["kind"] = "records"
        return profile

    def json_file(path):
        import os

        size = os.path.getsize(path)
        if size > full_bytes:
            with open(path, "rb") as f:
                start = f.read(4096).lstrip()[:1]
            shape = {b"[": "list", b"{": "object"}.get(start, "unknown")
            return {"kind": "json", "shape": shape, "parsed": False}
        with open(path, "rb") as f:
            data = json.load(f)
        if isinstance(data, list):
            if data and all(isinstance(item, dict) for item in data[:1000]):
                return records(data, len(data), True)
            kinds = sorted({describe(item).split(" ")[0] for item in data[:1000]})
            return {
                "kind": "json",
                "shape": "list",
                "length": len(data),
                "items": [cut(k, 40) for k in kinds[:10]],
            }
        if isinstance(data, dict):
            keys = [[cut(key, 80), cut(describe(value), 60)] for key, value in list(data.items())[:max_keys]]
            return {"kind": "json", "shape": "object", "keys": keys, "keys_total": len(data)}
        return {"kind": "json", "shape": cut(describe(data), 40)}

    def json_lines(path):
        items = []
        with open(path, "rb") as f:
            for line in f:
                if len(items) >= sample_rows or out_of_time():
                    break
                line = line.strip()
                if line:
                    items.append(json.loads(line))
        if not all(isinstance(item, dict) for item in items):
            raise ValueError("not one JSON object a line")
        lines, exact = count_lines(path)
        return records(items, lines, exact)

    def text(path):
        lines, exact = count_lines(path)
        return {"kind": "text", "lines": lines, "lines_exact": exact, "head": head_of(path)}

    readers = {
        "csv": lambda p: delimited(p, "csv"),
        "tsv": lambda p: delimited(p, "tsv"),
        "excel": excel,
        "parquet": parquet,
        "json": json_file,
        "jsonl": json_lines,
        "text": text,
    }
    profiles = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for file in request["files"]:
            if out_of_time():
                profiles.append({"kind": "skipped"})
                continue
            try:
                profiles.append(readers[file["kind"]](file["path"]))
            except Exception as error:  # noqa: BLE001 - every failure is reported
                profiles.append({"kind": "error", "error": cut("%s: %s" % (type(error).__name__, error), 200)})
    print(request["marker"] + json.dumps(profiles, default=str))


_main(REQUEST)
