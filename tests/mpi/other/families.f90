! A healthy Fortran MPI program (`use mpi`) on 4 ranks that makes the calls
! whose Fortran entry points hangtrace wraps: communicator creation and
! free, blocking and nonblocking collectives, a ring of nonblocking sends
! and receives completed by MPI_Waitall, MPI_Waitany (a wildcard receive,
! resolved at completion) and polled MPI_Testall, MPI_Sendrecv, MPI_Probe.
! Exits 0, or stops with the number of the check that failed.
program families
  use mpi
  implicit none
  integer :: rank, nranks, ierr, x, y, left, right, idx, sub, dup
  integer :: reqs(2), st(MPI_STATUS_SIZE), sts(MPI_STATUS_SIZE, 2)
  logical :: flag
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  right = mod(rank + 1, nranks)
  left = mod(rank + nranks - 1, nranks)
  x = rank
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), rank, sub, ierr)
  call MPI_Comm_dup(MPI_COMM_WORLD, dup, ierr)
  call MPI_Allreduce(x, y, 1, MPI_INTEGER, MPI_SUM, sub, ierr)
  call MPI_Bcast(y, 1, MPI_INTEGER, 0, dup, ierr)
  call MPI_Iallreduce(x, y, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Wait(reqs(1), st, ierr)
  if (y /= nranks - 1) stop 1
  call MPI_Irecv(y, 1, MPI_INTEGER, left, 5, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(x, 1, MPI_INTEGER, right, 5, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Waitall(2, reqs, sts, ierr)
  if (y /= left) stop 2
  call MPI_Irecv(y, 1, MPI_INTEGER, MPI_ANY_SOURCE, MPI_ANY_TAG, dup, reqs(1), ierr)
  call MPI_Isend(x, 1, MPI_INTEGER, right, 7, dup, reqs(2), ierr)
  call MPI_Waitany(2, reqs, idx, st, ierr)
  call MPI_Waitany(2, reqs, idx, st, ierr)
  if (y /= left) stop 3
  call MPI_Irecv(y, 1, MPI_INTEGER, left, 9, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(x, 1, MPI_INTEGER, right, 9, MPI_COMM_WORLD, reqs(2), ierr)
  flag = .false.
  do while (.not. flag)
    call MPI_Testall(2, reqs, flag, MPI_STATUSES_IGNORE, ierr)
  end do
  call MPI_Sendrecv(x, 1, MPI_INTEGER, right, 11, y, 1, MPI_INTEGER, left, 11, MPI_COMM_WORLD, st, ierr)
  if (y /= left) stop 4
  call MPI_Isend(x, 1, MPI_INTEGER, right, 13, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Probe(left, 13, MPI_COMM_WORLD, st, ierr)
  call MPI_Recv(y, 1, MPI_INTEGER, left, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)
  call MPI_Comm_free(sub, ierr)
  call MPI_Comm_free(dup, ierr)
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Finalize(ierr)
end program families
