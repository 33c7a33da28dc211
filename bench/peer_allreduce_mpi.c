/* Plain MPI peer of `dlscale commbench --op allreduce`: MPI_Allreduce (SUM,
 * float), out of place, or in place when the environment has
 * PEER_INPLACE=1 (restored from the input before each call, untimed), timed
 * like dlscale's: per size, warm-up untimed then timed calls, the mean per
 * rank, the slowest rank reported; the result is checked. Prints one JSON
 * line from rank 0.
 *
 *   mpicc -O2 -o build/peer_allreduce_mpi bench/peer_allreduce_mpi.c
 *   mpirun -np 2 build/peer_allreduce_mpi 5 20 1048576 67108864
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 4) {
    if (rank == 0) fprintf(stderr, "usage: %s WARMUP ITERS BYTES...\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  const char* mode = getenv("PEER_INPLACE");
  const int inplace = mode != NULL && mode[0] == '1';
  const int warmup = atoi(argv[1]);
  const int iters = atoi(argv[2]);
  if (rank == 0) {
    printf("{\"peer\": \"MPI_Allreduce%s\", \"workers\": %d, \"rows\": [",
           inplace ? " in place" : "", size);
  }
  for (int a = 3; a < argc; ++a) {
    const long bytes = atol(argv[a]);
    const long count = bytes / 4;
    float* in = malloc(count * sizeof(float));
    float* out = malloc(count * sizeof(float));
    for (long i = 0; i < count; ++i) in[i] = (float)((i + rank) % 3);
    double total = 0;
    for (int it = -warmup; it < iters; ++it) {
      if (it == 0) MPI_Barrier(MPI_COMM_WORLD);
      if (inplace) memcpy(out, in, count * sizeof(float));
      const double start = MPI_Wtime();
      MPI_Allreduce(inplace ? MPI_IN_PLACE : in, out, (int)count, MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
      if (it >= 0) total += MPI_Wtime() - start;
    }
    long wrong = 0;
    for (long i = 0; i < count; ++i) {
      float expected = 0;
      for (int r = 0; r < size; ++r) expected += (float)((i + r) % 3);
      wrong += out[i] != expected;
    }
    double mine = total / iters, worst = 0;
    long all_wrong = 0;
    MPI_Reduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&wrong, &all_wrong, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      const double algbw = bytes / worst / 1e9;
      printf("%s{\"bytes\": %ld, \"time_us\": %.3f, \"algbw_gbps\": %.6f, \"busbw_gbps\": %.6f, "
             "\"wrong\": %ld}", a > 3 ? ", " : "", bytes, worst * 1e6, algbw,
             algbw * 2.0 * (size - 1) / size, all_wrong);
    }
    free(in);
    free(out);
  }
  if (rank == 0) printf("]}\n");
  MPI_Finalize();
  return 0;
}
