"""Scalasca's analysis report (scout.cubex) as rows commdb's tests compare with.

Reads a Cube 4 report (the .cubex tar of anchor.xml and per-metric .index/.data files, as
Scalasca 2.6's cubew 4.6 writes it) with the pycubexr package, and prints, for every metric
named on the command line and every call path and location where it is not zero:

    metric,path,location,seconds

`path` is the call path from the root, region names joined by '/'; `location` is the
location's index in the report, which is the rank for the single-threaded traces the oracle
runs on; `seconds` is the value as Scalasca wrote it (full precision).

Usage: extract.py REPORT.cubex METRIC...
"""

import sys

from pycubexr import CubexParser
from pycubexr.parsers import anchor_xml_parser, tar_parser, xml_parser_helper


def parse_anchor_any_roots(root):
    """pycubexr's anchor parsing without its check for a single root call path: a run without
    an enclosing region (no main) has a root per outermost region."""
    result = anchor_xml_parser.AnchorXMLParseResult(
        attrs=xml_parser_helper.parse_attrs(root),
        metrics=xml_parser_helper.parse_metrics(root),
        regions=xml_parser_helper.parse_regions(root),
        cnodes=xml_parser_helper.parse_cnodes(root),
        system_tree_nodes=xml_parser_helper.parse_system_tree_nodes(root),
    )
    anchor_xml_parser._metric_tree_enumerations(result)
    for cnode in result.all_cnodes.values():
        cnode.region = result.regions_by_id[cnode.callee_region_id]
    return result


tar_parser.parse_anchor_xml = parse_anchor_any_roots


def path_of(cnode):
    names = []
    while cnode is not None:
        names.append(cnode.region.name)
        cnode = cnode.parent
    return "/".join(reversed(names))


def main():
    report, metrics = sys.argv[1], sys.argv[2:]
    print("metric,path,location,seconds")
    with CubexParser(report) as cube:
        locations = cube.get_locations()
        for name in metrics:
            metric = cube.get_metric_by_name(name)
            try:
                values = cube.get_metric_values(metric=metric)
            except Exception:
                # pycubexr raises on a metric the report holds no values for: all zero.
                continue
            rows = []
            for index in values.cnode_indices:
                cnode = cube.get_cnode(index)
                for position in range(len(locations)):
                    value = values.location_value(cnode, position)
                    if value != 0:
                        rows.append((path_of(cnode), position, float(value)))
            for path, position, value in sorted(rows):
                quoted = '"' + path.replace('"', '""') + '"'
                print(f"{name},{quoted},{position},{value!r}")


if __name__ == "__main__":
    main()
