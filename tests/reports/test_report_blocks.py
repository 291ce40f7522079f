"""``report --slo`` and ``report --html`` of a run whose summary is computed by row blocks (a long
run's columnar file; the threshold lowered here so that a small run takes that path): the same
console report and the same page as the whole-table summary gives."""

from __future__ import annotations

from tokenpace.cli.main import main
from tokenpace.metrics import summary as summary_module


def test_report_slo_and_html_by_row_blocks_equal_the_whole_table_ones(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["sim", "--concurrency", "8", "--requests", "150", "--warmup", "5", "--output-tokens", "24",
                 "--out", "s.json", "--quiet"]) == 0
    capsys.readouterr()
    pages = []
    outputs = []
    for threshold in (10**12, 0):  # the whole table, then by row blocks
        monkeypatch.setattr(summary_module, "ROW_BLOCKS_ABOVE", threshold)
        assert main(["report", "s.json", "--slo", "chat"]) == 0
        outputs.append(capsys.readouterr().out)
        page = tmp_path / f"page-{threshold}.html"
        assert main(["report", "s.json", "--slo", "chat", "--html", str(page)]) == 0
        capsys.readouterr()
        pages.append(page.read_text())
    assert "Goodput" in outputs[0] or "goodput" in outputs[0]
    assert outputs[0] == outputs[1]
    assert pages[0] == pages[1]
