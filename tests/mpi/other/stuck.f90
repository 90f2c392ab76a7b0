! A Fortran MPI program (`use mpi`) that hangs as tests/mpi/mpi_prog.c's
! "stuck" mode does: after five MPI_Allreduce on MPI_COMM_WORLD, rank 1
! waits in MPI_Recv from rank 0 (tag 7) instead of the sixth, which the
! others wait in. Rank 0 prints "stuck" once it is in place. Nothing here
! knows hangtrace.
program stuck
  use mpi
  implicit none
  integer :: rank, ierr, i, x, y, never
  integer :: status(MPI_STATUS_SIZE)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  x = 1
  do i = 1, 5
    call MPI_Allreduce(x, y, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  end do
  if (rank == 0) then
    print '(a)', 'stuck'
    flush(6)
  end if
  if (rank == 1) call MPI_Recv(never, 1, MPI_INTEGER, 0, 7, MPI_COMM_WORLD, status, ierr)
  call MPI_Allreduce(x, y, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Finalize(ierr)
end program stuck
