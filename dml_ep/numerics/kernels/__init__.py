"""What the operators' kernels share: reading tensors through their descs (``parameters``), the
requantize step in both arithmetics (``quantize``), the quantized products' skeleton
(``quantized_product``), im2col, onnxruntime's u8s8 saturation (``u8s8``), exact integer products
on float32 BLAS (``integer_gemm``), a float32 fused multiply-add (``float32_fma``), and the kernel
dispatch over the operator table (``dispatch``).

Each DirectML operator's own kernel lives in its module of ``dml_ep.operators``.
"""
