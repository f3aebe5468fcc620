"""QDQFinalCleanupTransformer: a DQ -> Q pair with the same constant parameters is an identity and goes.

onnxruntime runs it last, for every EP: the DQ's one consumer is the Q, and the Q is not a graph
output that other nodes also read. Readers of the Q's output then read the DQ's input; when the Q
made a graph output, the producer of the DQ's input writes that output instead (an Identity when
the DQ read a graph input or an initializer).
"""

from __future__ import annotations

import onnx

from .editable import EditableGraph
from .qdq_util import is_dq, is_q, is_qdq_pair_supported

NAME = "QDQFinalCleanupTransformer"


def qdq_final_cleanup(graph: EditableGraph) -> bool:
    changed = False
    for dq in [n for n in graph.nodes if is_dq(n)]:
        if dq not in graph or dq.output[0] in graph.graph_outputs:
            continue
        consumers = graph.consumers(dq.output[0])
        if len(consumers) != 1 or not is_q(consumers[0]) or not is_qdq_pair_supported(graph, consumers[0], dq):
            continue
        q = consumers[0]
        source, result = dq.input[0], q.output[0]
        if result in graph.graph_outputs:
            if graph.consumers(result):
                continue
            _write_graph_output(graph, dq, q, source, result)
        else:
            for reader in graph.consumers(result):
                reader.input[:] = [source if name == result else name for name in reader.input]
                graph.changed(reader)
            graph.replace([dq, q], None, NAME, at=q)
        changed = True
    return changed


def _write_graph_output(graph: EditableGraph, dq, q, source: str, result: str) -> None:
    producer = graph.producer(source)
    if producer is None or source in graph.graph_outputs:
        identity = onnx.helper.make_node("Identity", [source], [result], name=graph.unique_name(NAME))
        graph.replace([dq, q], identity, NAME, at=q)
        return
    for reader in graph.consumers(source):
        reader.input[:] = [result if name == source else name for name in reader.input]
        graph.changed(reader)
    producer.output[:] = [result if name == source else name for name in producer.output]
    renamed = onnx.NodeProto()
    renamed.CopyFrom(producer)
    graph.replace([producer, dq, q], renamed, NAME, at=producer)
