# Run by the jail's Python kernel once it is up (after TABLE_DATA): what a
# program shows reaches the page as the page can best show it.
#
# - A pandas frame or series printed alone (`print(df)`, `print(df.head())`)
#   is shown as `display` shows it: its text (exactly what print writes),
#   its HTML and its table data, so the page makes it its own table. Any
#   other print is print: another argument beside it, another file
#   (`file=sys.stderr`, a redirected stdout), another `end`, an empty frame
#   (its "Empty DataFrame" text says more than an empty table), headers over
#   several columns.
# - A matplotlib figure with nothing drawn on it (no axes, or axes without
#   lines, patches, collections, images, texts or tables) is not shown: a
#   line on stderr says it was left out.
#
# Neither applies in a kernel E2B's formatters were registered in (an E2B
# sandbox served by runcell): E2B's clients see print as stdout and every
# figure, as E2B's own kernels give them. Nothing is imported here that the
# kernel has not imported already: pandas and matplotlib are looked at only
# once a cell imported them. Any failure leaves print and figures as they
# were.
def _runcell_notebook_hooks():
    import builtins
    import sys
    from IPython import get_ipython

    shell = get_ipython()
    shown = shell.display_formatter
    kernel_stdout = sys.stdout
    table_type = 'application/vnd.runcell.table+json'
    left_out = 'runcell: a figure with nothing drawn on it was left out\n'

    def served_by_e2b():
        return 'e2b/data' in shown.formatters

    def printed_table(value):
        pandas = sys.modules.get('pandas')
        if pandas is None:
            return None
        if isinstance(value, pandas.Series):
            name = '' if value.name is None else value.name
            frame = value.to_frame(name=name)
        elif isinstance(value, pandas.DataFrame):
            frame = value
        else:
            return None
        if frame.shape[0] == 0 or frame.shape[1] == 0 or frame.columns.nlevels > 1:
            return None
        data, metadata = shown.format(frame)
        if table_type not in data:
            return None
        data['text/plain'] = str(value)
        return data, metadata

    plain_print = builtins.print

    def print(*values, sep=' ', end='\n', file=None, flush=False):
        to_stdout = file is None or file is kernel_stdout
        if len(values) == 1 and end in ('\n', None) and to_stdout and sys.stdout is kernel_stdout:
            try:
                table = None if served_by_e2b() else printed_table(values[0])
            except Exception:
                table = None
            if table is not None:
                from IPython.display import display
                data, metadata = table
                display(data, raw=True, metadata=metadata)
                return
        plain_print(*values, sep=sep, end=end, file=file, flush=flush)

    print.__doc__ = plain_print.__doc__
    builtins.print = print

    def drawn(figure):
        if figure.lines or figure.patches or figure.texts or figure.images or figure.artists:
            return True
        for axes in figure.axes:
            if axes.has_data() or axes.texts or axes.tables or axes.artists or axes.images:
                return True
        return False

    def nothing_drawn(value):
        if 'matplotlib.figure' not in sys.modules:
            return False
        from matplotlib.figure import Figure
        return isinstance(value, Figure) and not drawn(value)

    plain_format = shown.format

    def format(value, include=None, exclude=None):
        try:
            empty = not served_by_e2b() and nothing_drawn(value)
        except Exception:
            empty = False
        if empty:
            sys.stderr.write(left_out)
            return {}, {}
        return plain_format(value, include=include, exclude=exclude)

    shown.format = format


_runcell_notebook_hooks()
del _runcell_notebook_hooks
