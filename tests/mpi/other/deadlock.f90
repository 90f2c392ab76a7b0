! A Fortran MPI program (`use mpi`) that deadlocks: after three
! MPI_Allreduce, every rank posts MPI_Irecv from its right neighbour and
! waits for it in MPI_Wait; nobody sends. Rank 0 prints "stuck" first.
program deadlock
  use mpi
  implicit none
  integer :: rank, nranks, ierr, i, x, y, req
  integer :: status(MPI_STATUS_SIZE)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  x = 1
  do i = 1, 3
    call MPI_Allreduce(x, y, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  end do
  if (rank == 0) then
    print '(a)', 'stuck'
    flush(6)
  end if
  call MPI_Irecv(y, 1, MPI_INTEGER, mod(rank + 1, nranks), 9, MPI_COMM_WORLD, req, ierr)
  call MPI_Wait(req, status, ierr)
  call MPI_Finalize(ierr)
end program deadlock
