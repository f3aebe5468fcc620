/* One tile of a float32 GEMM panel, at most TILE_ROWS x TILE_COLUMNS sums: C[r][j] = sum over k in
   order, from zero, of A[r][k] * B[k][j], with one fused multiply-add per product (fmaf) or a
   multiply then an add, each rounded to float32. B is a packed column panel: TILE_COLUMNS values
   per k, zero past the GEMM's last column. Built for AVX2 and FMA, a whole tile is held in 12 AVX
   registers over all of K, as MLAS's FMA3 kernel holds its sums; the same operations. */
#include <math.h>
#include <stddef.h>
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#define TILE_ROWS 6
#define TILE_COLUMNS 16

#define DML_EP_SGEMM_TILE(NAME, STEP)                                                                           \
static void NAME(const float* a, ptrdiff_t a_row, ptrdiff_t a_k, const float* panel, float* c,                  \
                 ptrdiff_t c_row, ptrdiff_t rows, ptrdiff_t columns, ptrdiff_t depth) {                         \
    float sums[TILE_ROWS][TILE_COLUMNS] = {{0}};                                                                 \
    for (ptrdiff_t k = 0; k < depth; k++) {                                                                     \
        const float* row = panel + k * TILE_COLUMNS;                                                            \
        for (ptrdiff_t r = 0; r < rows; r++) {                                                                  \
            const float x = a[r * a_row + k * a_k];                                                             \
            for (ptrdiff_t j = 0; j < columns; j++) { STEP(sums[r][j], x, row[j]); }                            \
        }                                                                                                       \
    }                                                                                                           \
    for (ptrdiff_t r = 0; r < rows; r++)                                                                        \
        for (ptrdiff_t j = 0; j < columns; j++) c[r * c_row + j] = sums[r][j];                                  \
}

#define DML_EP_FUSED_STEP(sum, x, y) (sum) = fmaf((x), (y), (sum))
#define DML_EP_UNFUSED_STEP(sum, x, y) do { const float product = (x) * (y); (sum) = (sum) + product; } while (0)

#if defined(__AVX2__) && defined(__FMA__)
/* A whole tile in twelve AVX registers, as MLAS's kernels hold theirs: per k, the panel's 16 values
   in two registers, each row's A value broadcast, one FMA (or a multiply, then an add) per lane.
   A tile of fewer rows repeats its last row's sums and keeps only its own; padded columns are
   computed and dropped. Each kept element takes the same operations, in the same order, as the
   loops above. */
#define DML_EP_SGEMM_AVX_TILE(NAME, STEP)                                                                        \
static void NAME(const float* a, ptrdiff_t a_row, ptrdiff_t a_k, const float* panel, float* c,                  \
                 ptrdiff_t c_row, ptrdiff_t rows, ptrdiff_t columns, ptrdiff_t depth) {                         \
    ptrdiff_t offset[TILE_ROWS];                                                                                 \
    for (ptrdiff_t r = 0; r < TILE_ROWS; r++) offset[r] = (r < rows ? r : rows - 1) * a_row;                     \
    __m256 s00 = _mm256_setzero_ps(), s01 = s00, s10 = s00, s11 = s00, s20 = s00, s21 = s00, s30 = s00, s31 = s00;  \
    __m256 s40 = s00, s41 = s00, s50 = s00, s51 = s00;                                                           \
    for (ptrdiff_t k = 0; k < depth; k++) {                                                                     \
        const __m256 b0 = _mm256_loadu_ps(panel + k * TILE_COLUMNS), b1 = _mm256_loadu_ps(panel + k * TILE_COLUMNS + 8);  \
        const float* x_k = a + k * a_k;                                                                         \
        __m256 x = _mm256_broadcast_ss(x_k + offset[0]);                                                         \
        s00 = STEP(x, b0, s00); s01 = STEP(x, b1, s01);                                                          \
        x = _mm256_broadcast_ss(x_k + offset[1]);                                                                \
        s10 = STEP(x, b0, s10); s11 = STEP(x, b1, s11);                                                          \
        x = _mm256_broadcast_ss(x_k + offset[2]);                                                                \
        s20 = STEP(x, b0, s20); s21 = STEP(x, b1, s21);                                                          \
        x = _mm256_broadcast_ss(x_k + offset[3]);                                                                \
        s30 = STEP(x, b0, s30); s31 = STEP(x, b1, s31);                                                          \
        x = _mm256_broadcast_ss(x_k + offset[4]);                                                                \
        s40 = STEP(x, b0, s40); s41 = STEP(x, b1, s41);                                                          \
        x = _mm256_broadcast_ss(x_k + offset[5]);                                                                \
        s50 = STEP(x, b0, s50); s51 = STEP(x, b1, s51);                                                          \
    }                                                                                                           \
    if (rows == TILE_ROWS && columns == TILE_COLUMNS) { /* a whole tile: straight into C */                      \
        _mm256_storeu_ps(c, s00); _mm256_storeu_ps(c + 8, s01);                                                  \
        _mm256_storeu_ps(c + c_row, s10); _mm256_storeu_ps(c + c_row + 8, s11);                                  \
        _mm256_storeu_ps(c + 2 * c_row, s20); _mm256_storeu_ps(c + 2 * c_row + 8, s21);                          \
        _mm256_storeu_ps(c + 3 * c_row, s30); _mm256_storeu_ps(c + 3 * c_row + 8, s31);                          \
        _mm256_storeu_ps(c + 4 * c_row, s40); _mm256_storeu_ps(c + 4 * c_row + 8, s41);                          \
        _mm256_storeu_ps(c + 5 * c_row, s50); _mm256_storeu_ps(c + 5 * c_row + 8, s51);                          \
        return;                                                                                                 \
    }                                                                                                           \
    float sums[TILE_ROWS][TILE_COLUMNS];                                                                         \
    _mm256_storeu_ps(sums[0], s00); _mm256_storeu_ps(sums[0] + 8, s01);                                          \
    _mm256_storeu_ps(sums[1], s10); _mm256_storeu_ps(sums[1] + 8, s11);                                          \
    _mm256_storeu_ps(sums[2], s20); _mm256_storeu_ps(sums[2] + 8, s21);                                          \
    _mm256_storeu_ps(sums[3], s30); _mm256_storeu_ps(sums[3] + 8, s31);                                          \
    _mm256_storeu_ps(sums[4], s40); _mm256_storeu_ps(sums[4] + 8, s41);                                          \
    _mm256_storeu_ps(sums[5], s50); _mm256_storeu_ps(sums[5] + 8, s51);                                          \
    for (ptrdiff_t r = 0; r < rows; r++)                                                                        \
        for (ptrdiff_t j = 0; j < columns; j++) c[r * c_row + j] = sums[r][j];                                  \
}
#define DML_EP_AVX_FUSED(x, y, sum) _mm256_fmadd_ps((x), (y), (sum))
#define DML_EP_AVX_UNFUSED(x, y, sum) _mm256_add_ps((sum), _mm256_mul_ps((x), (y)))
DML_EP_SGEMM_AVX_TILE(dml_ep_sgemm_tile_fused, DML_EP_AVX_FUSED)
DML_EP_SGEMM_AVX_TILE(dml_ep_sgemm_tile_unfused, DML_EP_AVX_UNFUSED)
#else
DML_EP_SGEMM_TILE(dml_ep_sgemm_tile_fused, DML_EP_FUSED_STEP)
DML_EP_SGEMM_TILE(dml_ep_sgemm_tile_unfused, DML_EP_UNFUSED_STEP)
#endif
