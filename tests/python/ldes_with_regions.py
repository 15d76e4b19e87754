"""Solves a JMT model (.jsimg) with LINE's discrete-event simulator (LDES), finite
capacity regions included, and prints LINE's average table as CSV.

LINE's JSIMG reader (line_solver 3.0.8) drops <blockingRegion> elements, so this
reads them itself and adds each region to the network LINE read: its nodes, its
global job limit, and the per-class weights as a linear admission constraint
(sum of weight x jobs <= limit), since a weight of 0 (a background class that the
region does not hold back) is honoured only that way. Jobs are never dropped: they
wait at the region's entrance.

usage: python ldes_with_regions.py MODEL.jsimg SEED SAMPLES
"""

import sys
import xml.etree.ElementTree as ET

import numpy as np
from line_solver import LDES, GlobalConstants, VerboseLevel
from line_solver.io import M2M


def main():
    path, seed, samples = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    GlobalConstants.set_verbose(VerboseLevel.SILENT)
    model = M2M().JSIM2LINE(path)
    sim = ET.parse(path).getroot().find("sim")
    nodes = {n.get_name(): n for n in model.get_nodes()}
    classes = list(model.get_classes())
    for region in sim.findall("blockingRegion"):
        members = [nodes[r.get("nodeName")] for r in region.findall("regionNode")]
        limit = int(region.find("globalConstraint").get("maxJobs"))
        weights = {w.get("jobClass"): float(w.get("weight")) for w in region.findall("classWeight")}
        r = model.add_region(region.get("name"), *members)
        if limit >= 0:
            a = np.array([[weights.get(c.get_name(), 1.0) for c in classes]])
            r.set_linear_constraints(a, [limit])
        for c in classes:
            r.set_drop_rule(c, False)
    table = LDES(model, seed=seed, samples=samples).avg_table()
    print("Station,JobClass,QLen,Util,RespT,ResidT,ArvR,Tput")
    for _, row in table.iterrows():
        print(",".join([str(row["Station"]), str(row["JobClass"])] +
                       [repr(float(row[k])) for k in ("QLen", "Util", "RespT", "ResidT", "ArvR", "Tput")]))


if __name__ == "__main__":
    main()
