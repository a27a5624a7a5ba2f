# What E2B's code-interpreter template adds to its Python kernel, so that
# E2B's SDKs find `result.data` and `result.chart` and see PIL images: run
# once, silently, in the kernel of every E2B sandbox and Python context
# (never in notebooks: a data frame's whole data with every table would
# cost their output budget). Written for runcell; the MIME types and the
# chart extractor (`e2b_charts`, MIT, from PyPI) are E2B's.
def _runcell_e2b():
    import sys
    from IPython import get_ipython
    from IPython.core.formatters import BaseFormatter
    from traitlets import ObjectName, Unicode

    class Data(BaseFormatter):
        """A data frame's columns as lists (`e2b/data`)."""
        format_type = Unicode("e2b/data")
        print_method = ObjectName("_repr_e2b_data_")
        _return_type = (dict, str)

        def __call__(self, obj):
            pandas = sys.modules.get("pandas")
            if pandas is None or not isinstance(obj, pandas.DataFrame):
                return super().__call__(obj)
            columns = obj.to_dict(orient="list")
            return {
                str(name): [v.isoformat() if isinstance(v, pandas.Timestamp) else v for v in values]
                for name, values in columns.items()
            }

    class Chart(BaseFormatter):
        """A matplotlib figure's data, as E2B's chart extractor reads it (`e2b/chart`)."""
        format_type = Unicode("e2b/chart")
        print_method = ObjectName("_repr_e2b_chart_")
        _return_type = (dict, str)

        def __call__(self, obj):
            if sys.modules.get("matplotlib") is None:
                return super().__call__(obj)
            from matplotlib.figure import Figure
            if not isinstance(obj, Figure):
                return super().__call__(obj)
            try:
                from e2b_charts import chart_figure_to_dict
                return chart_figure_to_dict(obj)
            except Exception:
                return {}

    shell = get_ipython()
    shown = shell.display_formatter
    for formatter in (Data, Chart):
        shown.formatters[formatter.format_type.default_value] = formatter(parent=shown)

    # PIL: `Image.show()` and `Image.save(path)` show the image in the cell
    # (there is no screen to open a viewer on).
    try:
        from IPython.display import display
        from PIL import Image, ImageShow
    except Exception:
        return
    if getattr(Image.Image.save, "_runcell", False):
        return

    class Shown(ImageShow.Viewer):
        def show(self, image, **options):
            display(image)
            return 1

    # First among the viewers: no external one is ever started.
    ImageShow.register(Shown, 0)
    saved = Image.Image.save

    def save(image, fp, format=None, **params):
        if isinstance(fp, str):
            display(image)
        return saved(image, fp, format, **params)

    save._runcell = True
    Image.Image.save = save


_runcell_e2b()
del _runcell_e2b
